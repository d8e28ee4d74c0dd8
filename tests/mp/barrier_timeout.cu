// A barrier that the other ranks never join: rank 0 alone runs a block barrier, and the report
// names a rank it waited for and the epochs, instead of only a flag's offset.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "mp/timeout_report.cuh"

namespace {

__global__ void barrier_alone(const __grid_constant__ iris::device::Context ctx) {
  iris::device::barrier(iris::block{}, ctx);
}

TEST(BarrierTimeout, NamesTheRankThatDidNotArrive) {
  iris::Context& ctx = iris_test::timeout_context();
  ctx.barrier();
  if (ctx.rank() != 0) return;  // the others never come to the device barrier

  // Thread t waits for rank t, so any of ranks 1.. may be the one named (the first to time out).
  const std::string message =
      iris_test::timeout_message(ctx, [&] { barrier_alone<<<1, 32>>>(ctx.device()); });
  EXPECT_THAT(message, testing::ContainsRegex(
                           "^rank 0: barrier\\(block\\) timed out after [0-9.]+ ms waiting for "
                           "rank [1-9][0-9]* to arrive at epoch 1 \\(it has reached epoch 0; "
                           "does every rank run this barrier as often\\?\\) \\(block 0, thread "
                           "[1-9][0-9]*\\)$"));
}

}  // namespace
