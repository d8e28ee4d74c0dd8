// The tile all_gather asked for an algorithm it does not have (two_shot, an all_reduce's) reports
// it and traps, rather than running another one; the host throws the report. Only rank 0 runs
// the kernel (it traps before its first exchange; a trap under MPS ends the other ranks' CUDA
// contexts too, so one rank traps and the Context is never destroyed).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "ccl/common.cuh"
#include "mp/timeout_report.cuh"

namespace {

constexpr std::size_t kCount = 256;

TEST(CclTileAllGather, AnAlgorithmItLacksIsReportedNotReplaced) {
  iris::Context& ctx = iris_test::debug_check_context();
  // Never destroyed: its collective teardown needs a working device (see timeout_report.cuh).
  auto* comm = new iris::ccl::Communicator(ctx);
  auto* src = static_cast<float*>(ctx.allocate_bytes(kCount * sizeof(float)));
  auto* dst = static_cast<float*>(ctx.allocate_bytes(comm->size() * kCount * sizeof(float)));
  ctx.barrier();
  if (ctx.rank() != 0) return;
  const std::string message = iris_test::debug_check_message(ctx, [&] {
    ccl_test::one_tile_all_gather<<<1, 256>>>(comm->device(), dst, src, kCount,
                                              iris::ccl::Algorithm::kTwoShot);
  });
  EXPECT_THAT(message,
              testing::HasSubstr("rank 0: ccl all_gather: bad algorithm: iris::ccl::Algorithm " +
                                 std::to_string(static_cast<int>(iris::ccl::Algorithm::kTwoShot)) +
                                 " is not one that this device collective implements"));
}

}  // namespace
