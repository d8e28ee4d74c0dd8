// Shared by the multi-rank device API tests: one Context per process, neighbours, launch shapes.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "iris/iris.hpp"

namespace iris_test {

/// The rank's Context, made on first use and kept for the process: every test of a binary runs
/// on every rank in the same order, so the collective creation and destruction line up.
/// Waits are bounded well below the launcher's timeout, so a hang becomes a report.
inline iris::Context& context(bool debug_checks = false) {
  static iris::Context ctx = [&] {
    iris::ContextOptions options;
    options.heap_size = std::size_t{256} << 20;
    options.wait_timeout = std::chrono::seconds(30);
    options.debug_checks = debug_checks;
    return iris::Context::from_env(options);
  }();
  return ctx;
}

/// A symmetric buffer of `count` copies of `value` on every rank, for any element type (the
/// Context's own fills take the fixed-width types only); collective, ends with a barrier.
template <class T>
iris::Buffer<T> filled(iris::Context& ctx, std::size_t count, T value) {
  auto buffer = ctx.empty<T>(count);
  buffer.copy_from_host(std::vector<T>(count, value));
  ctx.barrier();
  return buffer;
}

inline int right_of(int rank, int world, int step = 1) {
  return (rank + step) % world;
}
inline int left_of(int rank, int world, int step = 1) {
  return (rank - step % world + world) % world;
}

constexpr unsigned kThreadsPerBlock = 128;

/// Index of the calling thread's group instance among all of the grid's groups of type G.
template <class G>
__device__ std::size_t group_index() {
  if constexpr (std::is_same_v<G, iris::block>) {
    return blockIdx.x;
  } else {
    return (std::size_t{blockIdx.x} * blockDim.x + threadIdx.x) / G::size();
  }
}

/// Threads in one group of type G when blocks have kThreadsPerBlock threads.
template <class G>
constexpr unsigned threads_per_group() {
  if constexpr (std::is_same_v<G, iris::block>) {
    return kThreadsPerBlock;
  } else {
    return G::size();
  }
}

/// Blocks of kThreadsPerBlock threads that hold `groups` groups of type G.
template <class G>
unsigned blocks_for(std::size_t groups) {
  const std::size_t threads = groups * threads_per_group<G>();
  return static_cast<unsigned>((threads + kThreadsPerBlock - 1) / kThreadsPerBlock);
}

template <class G>
const char* group_name() {
  if constexpr (std::is_same_v<G, iris::thread>) return "thread";
  if constexpr (std::is_same_v<G, iris::warp>) return "warp";
  if constexpr (std::is_same_v<G, iris::warps<2>>) return "warps<2>";
  if constexpr (std::is_same_v<G, iris::block>) return "block";
  return "?";
}

/// Calls f(G{}) for each cooperation level the tests cover.
template <class F>
void for_each_group(F&& f) {
  f(iris::thread{});
  f(iris::warp{});
  f(iris::warps<2>{});
  f(iris::block{});
}

}  // namespace iris_test
