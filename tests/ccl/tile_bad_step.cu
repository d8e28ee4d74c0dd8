// A tile collective whose Round step is past the steps a kernel's epoch has (it would meet the
// next call's exchanges, and a barrier could pass early) reports the step and the limit and traps;
// the host throws the report. Only rank 0 runs the kernel (it traps before its first exchange;
// a trap under MPS ends the other ranks' CUDA contexts too, so one rank traps and the Context is
// never destroyed).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "ccl/common.cuh"
#include "mp/timeout_report.cuh"

namespace {

constexpr std::size_t kCount = 256;

__global__ void all_reduce_at_step(const __grid_constant__ iris::ccl::device::Communicator comm,
                                   float* dst, const float* src, unsigned step) {
  namespace dev = iris::ccl::device;
  const std::uint64_t epoch = dev::begin(comm);
  dev::all_reduce(iris::block{}, comm, {epoch, 0, step}, dst, src, kCount,
                  iris::ccl::ReduceOp::kSum);
  dev::end(comm, epoch);
}

TEST(CclTileRound, AStepPastTheEpochIsReportedNotRun) {
  iris::Context& ctx = iris_test::debug_check_context();
  // Never destroyed: its collective teardown needs a working device (see timeout_report.cuh).
  auto* comm = new iris::ccl::Communicator(ctx);
  auto* src = static_cast<float*>(ctx.allocate_bytes(kCount * sizeof(float)));
  auto* dst = static_cast<float*>(ctx.allocate_bytes(kCount * sizeof(float)));
  ctx.barrier();
  if (ctx.rank() != 0) return;
  const std::string message = iris_test::debug_check_message(
      ctx, [&] { all_reduce_at_step<<<1, 256>>>(comm->device(), dst, src, 128); });
  EXPECT_THAT(message, testing::HasSubstr("rank 0: ccl all_reduce: Round step 128 is not below "
                                          "the 128 steps of a kernel's epoch"));
}

}  // namespace
