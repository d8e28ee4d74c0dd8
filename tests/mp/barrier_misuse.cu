// Debug checks of split-phase barriers: with IRIS_DEBUG_CHECKS on, a second arrive on a channel
// before its wait is reported (the channel and the epochs) instead of silently reusing an epoch.
// The trap ends the CUDA context, so only rank 0 makes the bad call, this is its own executable
// (barrier_stale_token.cu has the other misuse), and the Context is never destroyed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "iris/iris.hpp"

namespace {

__global__ void arrive_twice(const __grid_constant__ iris::device::Context ctx,
                             iris::device::Barriers bars) {
  (void)iris::device::arrive(iris::block{}, ctx, bars, 1);
  (void)iris::device::arrive(iris::block{}, ctx, bars, 1);  // the misuse: no wait in between
}

TEST(BarrierMisuse, ASecondArriveBeforeTheWaitIsReported) {
  iris::ContextOptions options;
  options.heap_size = std::size_t{64} << 20;
  options.debug_checks = true;
  auto* ctx = new iris::Context(iris::Context::from_env(options));  // never destroyed: see above
  static iris::Barriers bars = ctx->make_barriers(2);               // collective; kept
  ctx->barrier();
  if (ctx->rank() != 0) return;  // the others are done
  arrive_twice<<<1, 64>>>(ctx->device(), bars.device());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  try {
    cudaDeviceSynchronize();
    ctx->check_device_errors();
    FAIL() << "the check did not fire";
  } catch (const iris::Error& error) {
    EXPECT_NE(error.code(), iris::Errc::kDeviceTimeout);
    EXPECT_EQ(error.message(),
              "rank 0: barrier arrive: a second arrive on channel 1 before the wait for its "
              "arrival at epoch 1 (the channel completed epoch 0; on one channel a group "
              "alternates arrive and wait) (block 0, thread 0)");
  }
}

}  // namespace
