// Debug checks of split-phase barriers: with IRIS_DEBUG_CHECKS on, a wait with a token older than
// the channel's latest arrival is reported (the channel and the epochs) instead of returning at
// once. Every rank syncs twice on channel 0; then rank 0 alone waits with the first sync's token.
// The trap ends the CUDA context, so only rank 0 makes the bad call, this is its own executable,
// and the Context is never destroyed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "iris/iris.hpp"
#include "mp/timeout_report.cuh"

namespace {

__global__ void two_rounds(const __grid_constant__ iris::device::Context ctx,
                           iris::device::Barriers bars, iris::device::barrier_token* first) {
  const auto token = iris::device::arrive(iris::block{}, ctx, bars, 0);
  iris::device::wait(iris::block{}, ctx, bars, token);
  if (threadIdx.x == 0) *first = token;
  iris::device::sync(iris::block{}, ctx, bars, 0);
}

__global__ void wait_with(const __grid_constant__ iris::device::Context ctx,
                          iris::device::Barriers bars, const iris::device::barrier_token* token) {
  iris::device::wait(iris::block{}, ctx, bars, *token);
}

TEST(BarrierMisuse, AWaitWithAnOlderTokenIsReported) {
  iris::Context& ctx = iris_test::debug_check_context();  // never destroyed: see above
  static iris::Barriers bars = ctx.make_barriers(1);      // collective; kept
  iris::device::barrier_token* first = nullptr;
  ASSERT_EQ(cudaMalloc(&first, sizeof(*first)), cudaSuccess);
  two_rounds<<<1, 64>>>(ctx.device(), bars.device(), first);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ctx.check_device_errors();  // the well-formed rounds pass the checks
  ctx.barrier();
  if (ctx.rank() != 0) return;  // the others are done
  const std::string message = iris_test::debug_check_message(
      ctx, [&] { wait_with<<<1, 64>>>(ctx.device(), bars.device(), first); });
  EXPECT_EQ(message,
            "rank 0: barrier wait: the token is for epoch 1 on channel 0, but the channel's "
            "latest arrival is at epoch 2 (wait with the token of the last arrive) (block 0, "
            "thread 0)");
}

}  // namespace
