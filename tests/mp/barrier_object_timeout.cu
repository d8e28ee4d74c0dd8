// A barrier object's channel that the other ranks never come to: rank 0 alone syncs on channel
// 3, and the report names the channel, a rank it waited for, and the epochs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "mp/timeout_report.cuh"

namespace {

__global__ void sync_alone(const __grid_constant__ iris::device::Context ctx,
                           iris::device::Barriers bars) {
  iris::device::sync(iris::block{}, ctx, bars, 3);
}

TEST(BarrierObjectTimeout, NamesTheChannelAndTheRankThatDidNotArrive) {
  iris::Context& ctx = iris_test::timeout_context();
  static iris::Barriers bars = ctx.make_barriers(4);  // collective; kept, as the Context is
  ctx.barrier();
  if (ctx.rank() != 0) return;  // the others never come

  const std::string message =
      iris_test::timeout_message(ctx, [&] { sync_alone<<<1, 32>>>(ctx.device(), bars.device()); });
  EXPECT_THAT(message, testing::ContainsRegex(
                           "^rank 0: barrier sync timed out after [0-9.]+ ms on channel 3 "
                           "waiting for rank [1-9][0-9]* to arrive at epoch 1 \\(it has reached "
                           "epoch 0; does every member of the team \\{start 0, size [0-9]+, stride "
                           "1\\} arrive on this channel as often\\?\\) \\(block 0, thread "
                           "[1-9][0-9]*\\)$"));
}

}  // namespace
