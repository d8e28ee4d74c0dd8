// Debug checks across ranks: with IRIS_DEBUG_CHECKS on, a put to a rank outside the world is
// caught before it happens, and the host throws the report. Like wait_timeout, the trap ends
// the CUDA context, so only rank 0 makes the bad call, this is its own executable, and the
// Context is never destroyed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "iris/iris.hpp"

namespace {

__global__ void put_past_the_world(const __grid_constant__ iris::device::Context ctx, int* dst,
                                   const int* src) {
  iris::device::put(iris::warp{}, ctx, dst, src, 100, ctx.world_size());
}

TEST(DebugCheck, PutToARankOutsideTheWorldIsReported) {
  iris::ContextOptions options;
  options.heap_size = std::size_t{64} << 20;
  options.debug_checks = true;
  auto* ctx = new iris::Context(iris::Context::from_env(options));  // never destroyed: see above
  auto* buffer = static_cast<int*>(ctx->allocate_bytes(200 * sizeof(int)));
  ctx->barrier();
  if (ctx->rank() != 0) return;  // the others are done
  put_past_the_world<<<1, 32>>>(ctx->device(), buffer, buffer + 100);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  try {
    cudaDeviceSynchronize();
    ctx->check_device_errors();
    FAIL() << "the check did not fire";
  } catch (const iris::Error& error) {
    EXPECT_NE(error.code(), iris::Errc::kDeviceTimeout);
    const std::string world = std::to_string(ctx->world_size());
    EXPECT_THAT(error.message(),
                testing::MatchesRegex("rank " + std::to_string(ctx->rank()) + ": put: rank " +
                                      world + " is not in the world of " + world +
                                      " ranks \\(block 0, thread [0-9]+\\)"));
  }
}

}  // namespace
