// Debug checks across ranks: with IRIS_DEBUG_CHECKS on, a put to a rank outside the world is
// caught before it happens, and the host throws the report. Like wait_timeout, the trap ends
// the CUDA context, so only rank 0 makes the bad call, this is its own executable, and the
// Context is never destroyed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "iris/iris.hpp"
#include "mp/timeout_report.cuh"

namespace {

__global__ void put_past_the_world(const __grid_constant__ iris::device::Context ctx, int* dst,
                                   const int* src) {
  iris::device::put(iris::warp{}, ctx, dst, src, 100, ctx.world_size());
}

TEST(DebugCheck, PutToARankOutsideTheWorldIsReported) {
  iris::Context& ctx = iris_test::debug_check_context();  // never destroyed: see above
  auto* buffer = static_cast<int*>(ctx.allocate_bytes(200 * sizeof(int)));
  ctx.barrier();
  if (ctx.rank() != 0) return;  // the others are done
  const std::string message = iris_test::debug_check_message(
      ctx, [&] { put_past_the_world<<<1, 32>>>(ctx.device(), buffer, buffer + 100); });
  const std::string world = std::to_string(ctx.world_size());
  EXPECT_THAT(message, testing::MatchesRegex("rank " + std::to_string(ctx.rank()) + ": put: rank " +
                                             world + " is not in the world of " + world +
                                             " ranks \\(block 0, thread [0-9]+\\)"));
}

}  // namespace
