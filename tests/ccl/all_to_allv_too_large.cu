// all_to_allv with a send larger than its receiver's recv_counts: the receiving member's kernel
// reports the sender and both sizes before it copies anything, and traps; the host throws the
// report. Only member 1's tables are short (it alone traps at once; under MPS its trap ends the
// other ranks' CUDA contexts too, so only its report is checked, and the Context is never
// destroyed: mp/timeout_report.cuh).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "iris/ccl.hpp"
#include "iris/iris.hpp"

namespace {

iris::Context& context() {
  static iris::Context* ctx = [] {
    iris::ContextOptions options;
    options.heap_size = std::size_t{64} << 20;
    // Long enough that member 1 reports (right after its entry exchange) well before the others
    // give up waiting for it at their exit exchange.
    options.wait_timeout = std::chrono::seconds(5);
    return new iris::Context(iris::Context::from_env(options));
  }();
  return *ctx;
}

TEST(CclAllToAllv, ASendLargerThanItsRecvCountIsReportedNotCut) {
  iris::Context& ctx = context();
  if (ctx.world_size() < 2) GTEST_SKIP() << "needs 2 or more ranks";
  // Never destroyed: its collective teardown needs a working device.
  auto* comm = new iris::ccl::Communicator(ctx);
  const int n = comm->size();
  constexpr std::int64_t kCount = 1024;  // int32s each member sends each member
  auto* tables = static_cast<std::int64_t*>(ctx.allocate_bytes(4 * n * sizeof(std::int64_t)));
  auto* src = static_cast<std::int32_t*>(ctx.allocate_bytes(n * kCount * sizeof(std::int32_t)));
  auto* dst = static_cast<std::int32_t*>(ctx.allocate_bytes(n * kCount * sizeof(std::int32_t)));
  std::vector<std::int64_t> host(4 * n);
  for (int k = 0; k < n; ++k) {
    host[k] = kCount;              // send_counts
    host[n + k] = k * kCount;      // send_offsets
    host[2 * n + k] = kCount;      // recv_counts
    host[3 * n + k] = k * kCount;  // recv_offsets
  }
  if (comm->index() == 1) host[2 * n + 0] = kCount / 2;  // room for half of member 0's part
  ASSERT_EQ(cudaMemcpy(tables, host.data(), host.size() * 8, cudaMemcpyHostToDevice), cudaSuccess);
  ctx.barrier();
  comm->all_to_allv(dst, tables + 2 * n, tables + 3 * n, src, tables, tables + n, nullptr);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::string message;
  try {
    cudaDeviceSynchronize();
    ctx.check_device_errors();
  } catch (const iris::Error& error) {
    message = error.message();
    if (comm->index() == 1) EXPECT_EQ(error.code(), iris::Errc::kInvalidArgument);
  }
  if (comm->index() != 1) return;
  EXPECT_THAT(message, testing::HasSubstr("ccl all_to_allv: rank " +
                                          std::to_string(comm->team().world_rank(0)) +
                                          " sends 4096 bytes, more than the 2048 bytes the "
                                          "receive buffer holds (nothing was copied)"));
}

}  // namespace
