// A member that never joins a collective: the others' kernel reports which collective waited
// for which rank, traps, and the host throws that report (no hang). Only rank 0 runs the
// collective (lone_call.cuh).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "ccl/lone_call.cuh"

namespace {

TEST(CclMissingRank, TheWaitingRankReportsWhoDidNotCome) {
  const std::string message = ccl_test::lone_call_report([](auto& comm, float* buf) {
    comm.all_reduce(buf, buf, 4096, iris::ccl::ReduceOp::kSum, nullptr,
                    {.algorithm = iris::ccl::Algorithm::kTwoShot});
  });
  if (iris_test::timeout_context().rank() != 0) return;
  // The collective and its step, then the barrier channel (the block), the missing rank and the
  // epoch: the communicator's first call (epoch 1), step 0, i.e. 1 * 256 + 0, which the missing
  // rank never reached.
  EXPECT_THAT(message, testing::HasSubstr("ccl all_reduce (entry)"));
  EXPECT_THAT(message, testing::ContainsRegex("on channel [0-9]+ waiting for rank [1-9][0-9]* to "
                                              "arrive at epoch 256 \\(it has reached epoch 0"));
  // The team: the world's shape, here.
  EXPECT_THAT(message,
              testing::HasSubstr("does every member of the team {start 0, size " +
                                 std::to_string(iris_test::timeout_context().world_size()) +
                                 ", stride 1}"));
}

}  // namespace
