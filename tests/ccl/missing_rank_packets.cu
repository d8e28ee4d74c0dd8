// A member that never joins an all_reduce in packets (the default for small messages): the
// others' kernel reports the collective, the member whose packet never came, the round (the
// call's epoch) and the team, traps, and the host throws that report (no hang). Only rank 0 runs
// the collective (lone_call.cuh).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "ccl/lone_call.cuh"

namespace {

TEST(CclMissingRank, APacketWaitNamesTheCollectiveTheSenderTheRoundAndTheTeam) {
  const std::string message = ccl_test::lone_call_report([](auto& comm, float* buf) {
    comm.all_reduce(buf, buf, 4096, iris::ccl::ReduceOp::kSum, nullptr,
                    {.algorithm = iris::ccl::Algorithm::kOneShot});
  });
  if (iris_test::timeout_context().rank() != 0) return;
  // The communicator's first call is round 1; the slots still hold nothing (round 0).
  EXPECT_THAT(message, testing::HasSubstr("ccl all_reduce (packets)"));
  EXPECT_THAT(message, testing::ContainsRegex("waiting for rank [1-9][0-9]*'s packet of round 1 "
                                              "\\(the slot holds round 0's"));
  EXPECT_THAT(message,
              testing::HasSubstr("does every member of the team {start 0, size " +
                                 std::to_string(iris_test::timeout_context().world_size()) +
                                 ", stride 1}"));
}

}  // namespace
