// A recv whose buffer is smaller than what its sender sends: the receiving kernel reports the
// sender and both sizes, copies nothing, and traps; the host throws that report (no hang, no
// bytes written past the buffer). Only member 1 traps: under MPS a trap ends the other ranks'
// CUDA contexts too, so the sender's own outcome is not checked, and the Context is never
// destroyed (mp/timeout_report.cuh).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "iris/ccl.hpp"
#include "mp/timeout_report.cuh"

namespace {

TEST(CclRecv, ASenderLargerThanTheBufferIsReportedNotCopied) {
  iris::Context& ctx = iris_test::timeout_context();
  if (ctx.world_size() < 2) GTEST_SKIP() << "needs 2 or more ranks";
  // Never destroyed: its collective teardown needs a working device.
  auto* comm = new iris::ccl::Communicator(ctx);
  auto* buf = static_cast<std::byte*>(ctx.allocate_bytes(8192));
  ctx.barrier();
  if (comm->index() == 0) {
    comm->send(buf, 8192, 1, nullptr);
    try {
      cudaDeviceSynchronize();
      ctx.check_device_errors();
    } catch (const iris::Error&) {
      // The receiver's trap may end this context too, or this send may time out waiting for
      // it: either way the receiver's report is what the test is about.
    }
    return;
  }
  if (comm->index() != 1) return;
  const std::string message =
      iris_test::debug_check_message(ctx, [&] { comm->recv(buf, 4096, 0, nullptr); });
  EXPECT_THAT(message,
              testing::HasSubstr("rank " + std::to_string(ctx.rank()) + ": ccl recv: rank " +
                                 std::to_string(comm->team().world_rank(0)) +
                                 " sends 8192 bytes, more than the 4096 bytes the "
                                 "receive buffer holds (nothing was copied"));
}

}  // namespace
