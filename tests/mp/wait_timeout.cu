// A bounded wait that nobody satisfies: the last rank waits for a flag that no one raises, and
// the report names the rank, the flag's heap offset, the condition and the value last seen.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>

#include "mp/timeout_report.cuh"

namespace {

__global__ void wait_for_nobody(const __grid_constant__ iris::device::Context ctx,
                                const std::uint64_t* flag) {
  iris::device::wait_until(ctx, flag, iris::cmp::ge, 5);
}

TEST(WaitTimeout, ReportsRankOffsetConditionAndObservedValue) {
  iris::Context& ctx = iris_test::timeout_context();
  auto* flag = static_cast<std::uint64_t*>(ctx.allocate_bytes(sizeof(std::uint64_t)));
  ASSERT_EQ(cudaMemset(flag, 0, sizeof(std::uint64_t)), cudaSuccess);
  ctx.barrier();
  if (ctx.rank() != ctx.world_size() - 1) return;  // the others are done

  const std::string message =
      iris_test::timeout_message(ctx, [&] { wait_for_nobody<<<1, 1>>>(ctx.device(), flag); });
  char expected[160];
  std::snprintf(expected, sizeof(expected),
                "rank %d: wait_until(heap offset 0x%zx on rank %d, ge 5) timed out after ",
                ctx.rank(), ctx.device().offset_of(flag), ctx.rank());
  EXPECT_THAT(message, testing::StartsWith(expected));
  EXPECT_THAT(message, testing::EndsWith(", observed 0 (block 0, thread 0)"));
}

}  // namespace
