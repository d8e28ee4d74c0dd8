// Debug checks of collective arguments (IRIS_DEBUG_CHECKS on): calls that agree across the team
// run and give the right result, call after call, in every kernel the check sits in; a member
// whose count differs from member 0's reports it, naming the call, the argument, both values
// and rank 0, and the host throws that report. The trap ends the CUDA context (under MPS, those
// of the other ranks too), so the failing call is the last test, only rank 1 differs (only the
// members that differ from member 0 trap at once), and the Context is never destroyed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "iris/ccl.hpp"
#include "iris/iris.hpp"

namespace {

using iris::ccl::Algorithm;
using iris::ccl::ReduceOp;

iris::Context& debug_context() {
  static iris::Context* ctx = [] {
    iris::ContextOptions options;
    options.heap_size = std::size_t{64} << 20;
    options.debug_checks = true;
    // Long enough that rank 1 reports (at the start of its kernel) well before the others give
    // up waiting for it at their entry exchange.
    options.wait_timeout = std::chrono::seconds(5);
    return new iris::Context(iris::Context::from_env(options));
  }();
  return *ctx;
}

iris::ccl::Communicator& debug_comm() {
  // Never destroyed: its collective teardown needs a working device (see the top).
  static auto* comm = new iris::ccl::Communicator(debug_context());
  return *comm;
}

TEST(CclArgCheck, AgreeingCallsRunInEveryKernelCallAfterCall) {
  iris::Context& ctx = debug_context();
  iris::ccl::Communicator& comm = debug_comm();
  const int n = comm.size();
  constexpr std::size_t kCount = 4096;
  auto* a = static_cast<float*>(ctx.allocate_bytes(n * kCount * sizeof(float)));
  auto* b = static_cast<float*>(ctx.allocate_bytes(n * kCount * sizeof(float)));
  std::vector<float> host(n * kCount);
  for (int round = 0; round < 3; ++round) {
    for (std::size_t i = 0; i < host.size(); ++i)
      host[i] = static_cast<float>((i + ctx.rank() + round) % 17);
    ASSERT_EQ(cudaMemcpy(a, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
    for (Algorithm algorithm :
         {Algorithm::kOneShot, Algorithm::kOneShotPull, Algorithm::kOneShotPush,
          Algorithm::kTwoShot, Algorithm::kTwoShotPackets}) {
      comm.all_reduce(b, a, kCount, ReduceOp::kSum, nullptr, {.algorithm = algorithm});
      std::vector<float> out(kCount);
      ASSERT_EQ(cudaMemcpy(out.data(), b, kCount * sizeof(float), cudaMemcpyDeviceToHost),
                cudaSuccess);
      for (std::size_t i = 0; i < kCount; i += 97) {
        float want = 0;
        for (int r = 0; r < n; ++r) want += static_cast<float>((i + r + round) % 17);
        ASSERT_EQ(out[i], want) << "round " << round << ", " << iris::ccl::to_string(algorithm);
      }
    }
    comm.reduce_scatter(b, a, kCount, ReduceOp::kMax, nullptr);
    comm.reduce(b, a, kCount, ReduceOp::kMin, n - 1, nullptr);
    comm.all_gather(b, a, kCount, nullptr, {.algorithm = Algorithm::kPull});
    comm.all_gather(b, a, kCount, nullptr, {.algorithm = Algorithm::kPush});
    comm.all_gather(a, a + comm.index() * kCount, kCount, nullptr);  // in place
    comm.all_to_all(b, a, kCount, nullptr);
    // 64 rows of 64 columns each: the check compares the rows and the row's bytes.
    comm.all_gather_2d(b, n * std::size_t{64}, a, 64, kCount / 64, 64, nullptr);
    comm.broadcast(b, a, kCount, 0, nullptr);
    comm.gather(b, a, kCount, n - 1, nullptr);
    comm.scatter(b, a, kCount, 0, nullptr);
    comm.barrier(nullptr);
    ctx.barrier();  // synchronizes the device: throws any report
  }
}

TEST(CclArgCheck, ACountThatDiffersIsReportedByTheRankThatDiffers) {
  iris::Context& ctx = debug_context();
  iris::ccl::Communicator& comm = debug_comm();
  if (comm.size() < 2) GTEST_SKIP() << "needs 2 or more ranks";
  auto* buf = static_cast<float*>(ctx.allocate_bytes(8192 * sizeof(float)));
  ctx.barrier();
  const std::size_t count = comm.index() == 1 ? 2048 : 4096;
  comm.all_reduce(buf + 4096, buf, count, ReduceOp::kSum, nullptr,
                  {.algorithm = Algorithm::kTwoShot});
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::string message;
  bool failed = false;
  try {
    cudaDeviceSynchronize();
    ctx.check_device_errors();
  } catch (const iris::Error& error) {
    failed = true;
    message = error.message();
    if (comm.index() == 1) EXPECT_EQ(error.code(), iris::Errc::kInvalidArgument);
  }
  // The member that differs reports and traps. The others may complete the call: blocks of
  // the trapping kernel that had started before the trap may already have met them (seen on
  // the H200 at 2, 4 and 8 ranks), so their results are undefined and only the report counts:
  // it is what ends a job.
  if (comm.index() == 1) {
    EXPECT_TRUE(failed);
    EXPECT_THAT(message, testing::StartsWith("rank " + std::to_string(ctx.rank()) +
                                             ": ccl all_reduce: count differs across the team: "
                                             "2048 here, 4096 on rank 0"));
  }
}

}  // namespace
