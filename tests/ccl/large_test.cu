// The largest counts the issue asks for: a 256 MiB all_reduce and an all_gather with 256 MiB of
// output, odd counts, outputs poisoned first and every element checked exactly. Its own Context
// with a heap that holds them (the shared test context's heap is smaller).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "ccl/common.cuh"

namespace {

using namespace ccl_test;

constexpr std::size_t kBigBytes = std::size_t{256} << 20;

iris::Context& big_context() {
  static iris::Context ctx = [] {
    iris::ContextOptions options;
    // Input and output of the 256 MiB all_reduce, the communicator's workspace, and slack.
    options.heap_size = std::size_t{640} << 20;
    options.wait_timeout = std::chrono::seconds(30);
    return iris::Context::from_env(options);
  }();
  return ctx;
}

iris::ccl::Communicator& big_world() {
  static iris::ccl::Communicator comm(big_context());
  return comm;
}

/// Element i of world rank r's input: small integers with period 31 in i, so that the host
/// computes the expected sums from a table of 31 values.
std::int32_t big_value(int r, std::size_t i) {
  return static_cast<std::int32_t>((i * 7 + static_cast<std::size_t>(r) * 13) % 31) - 15;
}

std::vector<std::int32_t> inputs(int rank, std::size_t count) {
  std::vector<std::int32_t> host(count);
  for (std::size_t i = 0; i < count; ++i) host[i] = big_value(rank, i);
  return host;
}

TEST(CclLarge, AllReduceOf256MiBOddCount) {
  iris::Context& ctx = big_context();
  auto& comm = big_world();
  // 256 MiB less three elements: odd, and the last block's tile is ragged.
  const std::size_t count = kBigBytes / sizeof(std::int32_t) - 3;
  const std::size_t bytes = count * sizeof(std::int32_t);
  auto* src = static_cast<std::int32_t*>(ctx.allocate_bytes(bytes));
  auto* dst = static_cast<std::int32_t*>(ctx.allocate_bytes(bytes));
  const auto host = inputs(ctx.rank(), count);
  upload(src, host.data(), bytes);
  const auto ranks = members(comm);
  std::int32_t sums[31];
  for (std::size_t i = 0; i < 31; ++i) {
    sums[i] = 0;
    for (int r : ranks) sums[i] += big_value(r, i);
  }
  for (Algorithm algorithm : {Algorithm::kAuto, Algorithm::kOneShotPull}) {
    poison(dst, bytes);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ctx.barrier();
    comm.all_reduce(dst, src, count, ReduceOp::kSum, nullptr, {.algorithm = algorithm});
    const auto got_bytes = download(dst, bytes);
    const auto* got = reinterpret_cast<const std::int32_t*>(got_bytes.data());
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < count; ++i) {
      if (got[i] != sums[i % 31] && wrong++ < 5)
        ADD_FAILURE() << iris::ccl::to_string(algorithm) << ": element " << i << " is " << got[i]
                      << ", want " << sums[i % 31];
    }
    EXPECT_EQ(wrong, 0u) << iris::ccl::to_string(algorithm) << " of " << count << " elements";
    ctx.barrier();
  }
  ctx.free_bytes(dst);
  ctx.free_bytes(src);
}

TEST(CclLarge, AllGatherInto256MiBOddCount) {
  iris::Context& ctx = big_context();
  auto& comm = big_world();
  const int n = comm.size();
  // Each member's part is odd and the whole output just under 256 MiB.
  const std::size_t count = (kBigBytes / sizeof(std::int32_t) / n - 1) | 1;
  const std::size_t all = count * n;
  auto* src = static_cast<std::int32_t*>(ctx.allocate_bytes(count * sizeof(std::int32_t)));
  auto* dst = static_cast<std::int32_t*>(ctx.allocate_bytes(all * sizeof(std::int32_t)));
  const auto host = inputs(ctx.rank(), count);
  upload(src, host.data(), count * sizeof(std::int32_t));
  const auto ranks = members(comm);
  for (Algorithm algorithm : {Algorithm::kPull, Algorithm::kPush, Algorithm::kRing}) {
    poison(dst, all * sizeof(std::int32_t));
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ctx.barrier();
    comm.all_gather(dst, src, count, nullptr, {.algorithm = algorithm});
    const auto got_bytes = download(dst, all * sizeof(std::int32_t));
    const auto* got = reinterpret_cast<const std::int32_t*>(got_bytes.data());
    std::size_t wrong = 0;
    for (std::size_t j = 0; j < all; ++j) {
      const std::int32_t want = big_value(ranks[j / count], j % count);
      if (got[j] != want && wrong++ < 5)
        ADD_FAILURE() << iris::ccl::to_string(algorithm) << ": element " << j << " is " << got[j]
                      << ", want " << want;
    }
    EXPECT_EQ(wrong, 0u) << iris::ccl::to_string(algorithm) << " of " << all << " elements";
    ctx.barrier();
  }
  ctx.free_bytes(dst);
  ctx.free_bytes(src);
}

}  // namespace
