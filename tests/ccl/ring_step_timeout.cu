// A ring whose neighbour never takes its steps: rank 0 runs the tile all_gather by ring, the
// others meet it at the call's entry (a sync on the same step) and stop there. With 3 or more
// ranks rank 0's second step waits for its left neighbour's signal and reports the call, the
// step, the channel, the neighbour and the team; with 2 (one step, no signal) it waits at the
// exit exchange for rank 1. The host throws the report (no hang). Only rank 0 traps (a trap
// under MPS ends the other ranks' CUDA contexts too; they have finished by then).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "ccl/common.cuh"
#include "mp/timeout_report.cuh"

namespace {

constexpr std::size_t kCount = 1024;

__global__ void entry_only_kernel(const __grid_constant__ iris::ccl::device::Communicator comm) {
  namespace dev = iris::ccl::device;
  const std::uint64_t epoch = dev::begin(comm);
  dev::sync(iris::block{}, comm, {epoch, 0, 0});  // the all_gather's entry exchange, and no more
  dev::end(comm, epoch);
}

TEST(CclRingStep, AWaitingRankNamesTheStepAndTheNeighbour) {
  iris::Context& ctx = iris_test::timeout_context();
  // Never destroyed: its collective teardown needs a working device (see timeout_report.cuh).
  auto* comm = new iris::ccl::Communicator(ctx);
  const int n = comm->size();
  auto* src = static_cast<float*>(ctx.allocate_bytes(kCount * sizeof(float)));
  auto* dst = static_cast<float*>(ctx.allocate_bytes(n * kCount * sizeof(float)));
  ctx.barrier();
  if (ctx.rank() != 0) {
    entry_only_kernel<<<1, 256>>>(comm->device());
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return;
  }
  const std::string message = iris_test::timeout_message(ctx, [&] {
    ccl_test::one_tile_all_gather<<<1, 256>>>(comm->device(), dst, src, kCount,
                                              iris::ccl::Algorithm::kRing);
  });
  if (n >= 3) {
    // Step 2 of n - 1 waits for the left neighbour (the last rank) on channel 0.
    EXPECT_THAT(message, testing::HasSubstr("ccl all_gather step 2/" + std::to_string(n - 1)));
    EXPECT_THAT(message, testing::HasSubstr("on channel 0 waiting for rank " +
                                            std::to_string(n - 1) + " to arrive"));
  } else {
    EXPECT_THAT(message, testing::HasSubstr("ccl all_gather (exit)"));
    EXPECT_THAT(message, testing::HasSubstr("waiting for rank 1"));
  }
  EXPECT_THAT(message, testing::HasSubstr("does every member of the team {start 0, size " +
                                          std::to_string(n) + ", stride 1}"));
}

}  // namespace
