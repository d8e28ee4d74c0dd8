// Debug checks of split-phase barriers: with IRIS_DEBUG_CHECKS on, a second arrive on a channel
// before its wait is reported (the channel and the epochs) instead of silently reusing an epoch.
// The trap ends the CUDA context, so only rank 0 makes the bad call, this is its own executable
// (barrier_stale_token.cu has the other misuse), and the Context is never destroyed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "iris/iris.hpp"
#include "mp/timeout_report.cuh"

namespace {

__global__ void arrive_twice(const __grid_constant__ iris::device::Context ctx,
                             iris::device::Barriers bars) {
  (void)iris::device::arrive(iris::block{}, ctx, bars, 1);
  (void)iris::device::arrive(iris::block{}, ctx, bars, 1);  // the misuse: no wait in between
}

TEST(BarrierMisuse, ASecondArriveBeforeTheWaitIsReported) {
  iris::Context& ctx = iris_test::debug_check_context();  // never destroyed: see above
  static iris::Barriers bars = ctx.make_barriers(2);      // collective; kept
  ctx.barrier();
  if (ctx.rank() != 0) return;  // the others are done
  const std::string message = iris_test::debug_check_message(
      ctx, [&] { arrive_twice<<<1, 64>>>(ctx.device(), bars.device()); });
  EXPECT_EQ(message,
            "rank 0: barrier arrive: a second arrive on channel 1 before the wait for its "
            "arrival at epoch 1 (the channel completed epoch 0; on one channel a group "
            "alternates arrive and wait) (block 0, thread 0)");
}

}  // namespace
