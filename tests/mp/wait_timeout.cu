// A bounded wait that nobody satisfies: the last rank waits for a flag that no one raises, with
// a short timeout, and its host must throw iris::Error(kDeviceTimeout) with the report. The trap
// that ends the kernel also ends the process's CUDA context (and, under MPS, those of the other
// ranks on the GPU), so only one rank traps, this is its own executable, and the Context is
// deliberately never destroyed (its collective teardown needs a working device).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "iris/iris.hpp"

namespace {

__global__ void wait_for_nobody(const __grid_constant__ iris::device::Context ctx,
                                const std::uint64_t* flag) {
  iris::device::wait_until(ctx, flag, iris::cmp::ge, 5);
}

TEST(WaitTimeout, ReportsRankOffsetConditionAndObservedValue) {
  iris::ContextOptions options;
  options.heap_size = std::size_t{64} << 20;
  options.wait_timeout = std::chrono::milliseconds(500);
  auto* ctx = new iris::Context(iris::Context::from_env(options));  // never destroyed: see above
  auto* flag = static_cast<std::uint64_t*>(ctx->allocate_bytes(sizeof(std::uint64_t)));
  ASSERT_EQ(cudaMemset(flag, 0, sizeof(std::uint64_t)), cudaSuccess);
  ctx->barrier();
  if (ctx->rank() != ctx->world_size() - 1) return;  // the others are done

  wait_for_nobody<<<1, 1>>>(ctx->device(), flag);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  char expected[160];
  std::snprintf(expected, sizeof(expected),
                "rank %d: wait_until(heap offset 0x%zx on rank %d, ge 5) timed out after ",
                ctx->rank(), ctx->device().offset_of(flag), ctx->rank());
  try {
    cudaDeviceSynchronize();
    ctx->check_device_errors();
    FAIL() << "the wait did not time out";
  } catch (const iris::Error& error) {
    EXPECT_EQ(error.code(), iris::Errc::kDeviceTimeout);
    EXPECT_THAT(error.message(), testing::StartsWith(expected));
    EXPECT_THAT(error.message(), testing::EndsWith(", observed 0 (block 0, thread 0)"));
  }
}

}  // namespace
