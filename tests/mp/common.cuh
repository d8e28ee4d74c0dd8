// Shared by the multi-rank device API tests: one Context per process, neighbours, launch shapes.
#pragma once

#include <cooperative_groups.h>
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

// Groups the tests build at run time, named by a marker type (G{} for the iris tags):
/// warp_span: warps {0,1} and {2,3} of each 4-warp block, on caller-given barrier ids 9 and 10.
struct span_pair {};
/// cg::this_thread_block().
struct cg_block {};
/// cg::tiled_partition<32>(cg::this_thread_block()).
struct cg_warp {};

template <class G>
__device__ auto make_group() {
  namespace cg = cooperative_groups;
  if constexpr (std::is_same_v<G, span_pair>) {
    const unsigned pair = (threadIdx.x / 32) / 2;
    return iris::warp_span{.first = 2 * pair, .count = 2, .barrier_id = 9 + pair};
  } else if constexpr (std::is_same_v<G, cg_block>) {
    return cg::this_thread_block();
  } else if constexpr (std::is_same_v<G, cg_warp>) {
    return cg::tiled_partition<32>(cg::this_thread_block());
  } else {
    return G{};
  }
}

/// Threads in one group of type G when blocks have kThreadsPerBlock threads.
template <class G>
constexpr unsigned threads_per_group() {
  if constexpr (std::is_same_v<G, iris::block> || std::is_same_v<G, cg_block>) {
    return kThreadsPerBlock;
  } else if constexpr (std::is_same_v<G, span_pair>) {
    return 64;
  } else if constexpr (std::is_same_v<G, cg_warp>) {
    return 32;
  } else {
    return G::num_threads();
  }
}

/// Index of the calling thread's group instance among all of the grid's groups of type G.
template <class G>
__device__ std::size_t group_index() {
  return (std::size_t{blockIdx.x} * blockDim.x + threadIdx.x) / threads_per_group<G>();
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
  if constexpr (std::is_same_v<G, iris::warps<4>>) return "warps<4>";
  if constexpr (std::is_same_v<G, iris::block>) return "block";
  if constexpr (std::is_same_v<G, span_pair>) return "warp_span{2 warps, ids 9/10}";
  if constexpr (std::is_same_v<G, cg_block>) return "cg::thread_block";
  if constexpr (std::is_same_v<G, cg_warp>) return "cg::thread_block_tile<32>";
  return "?";
}

/// Calls f(G{}) for each cooperation level the tests cover (the marker types above included).
template <class F>
void for_each_group(F&& f) {
  f(iris::thread{});
  f(iris::warp{});
  f(iris::warps<2>{});
  f(iris::warps<4>{});
  f(iris::block{});
  f(span_pair{});
  f(cg_block{});
  f(cg_warp{});
}

}  // namespace iris_test
