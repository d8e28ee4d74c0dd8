// What the host hears when a kernel fails: a bounded wait that times out, and each debug-check
// violation, reported as iris::Error with the rank, the operation and the numbers.
//
// Each failure runs in a fresh child process (this binary again, told which failure by
// IRIS_TEST_FAILURE; support/child_test.hpp says why), and this parent never makes a CUDA
// context of its own.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "iris/iris.hpp"
#include "support/child_test.hpp"

namespace {

enum class Failure {
  kTimeout,
  kBadRank,
  kOutsideHeap,
  kShapeMismatch,
  kTooManyBlocks,
  kGridNotResident,
  kTranslateOutsideHeap,  // ctx.translate, as README-style code calls it, is checked too
  kBadChannel,
  kNotInTeam,
  kBadMember,
  kTooManyWarpGroups,  // a ninth iris::warps<2> group of a 576-thread block signals
};

constexpr const char* kFailureVariable = "IRIS_TEST_FAILURE";

__global__ void fail(const __grid_constant__ iris::device::Context ctx, Failure failure,
                     std::uint32_t* flag, float* heap_floats, float* outside,
                     iris::device::Barriers bars, iris::device::Barriers others) {
  namespace d = iris::device;
  switch (failure) {
    case Failure::kTimeout:
      d::wait_until(ctx, flag, iris::cmp::eq, 3u);
      break;
    case Failure::kBadRank:
      d::atomic_add(ctx, flag, 1u, 1);
      break;
    case Failure::kOutsideHeap:
      d::get(iris::block{}, ctx, heap_floats, outside, 64, 0);
      break;
    case Failure::kShapeMismatch:
      d::put(iris::warp{}, ctx, d::tile_view<float>(heap_floats, 4, 8, 8),
             d::tile_view<const float>(heap_floats + 64, 4, 7, 7), 0);
      break;
    case Failure::kTooManyBlocks:
      d::barrier(iris::block{}, ctx);
      break;
    case Failure::kGridNotResident:
      d::barrier(iris::grid{}, ctx);
      break;
    case Failure::kTranslateOutsideHeap:
      ctx.translate(heap_floats, 0, std::size_t{1} << 30)[0] = 1.0f;
      break;
    case Failure::kBadChannel:
      d::sync(iris::warp{}, ctx, bars, 2);
      break;
    case Failure::kNotInTeam:
      d::sync(iris::warp{}, ctx, others, 0);
      break;
    case Failure::kBadMember:
      ctx.translate(heap_floats, iris::team{.start = 0, .size = 1, .stride = 1}, 1)[0] = 1.0f;
      break;
    case Failure::kTooManyWarpGroups:
      d::signal(iris::warps<2>{}, ctx, d::signal_add(flag, 1u), 0);
      break;
  }
}

/// The child: a single-rank Context with debug checks and a short timeout, the failing kernel,
/// then "<timeout|misuse>|<message>" on stdout and exit code 3.
[[noreturn]] void report_failure(Failure failure) {
  iris::ContextOptions options;
  options.heap_size = std::size_t{64} << 20;
  options.debug_checks = true;
  options.wait_timeout = std::chrono::milliseconds(200);
  auto* ctx = new iris::Context(iris::Context::from_env(options));  // its device ends here
  auto* flag = static_cast<std::uint32_t*>(ctx->allocate_bytes(256));
  auto* floats = static_cast<float*>(ctx->allocate_bytes(1024));
  float* outside = nullptr;
  if (cudaMemset(flag, 0, 256) != cudaSuccess || cudaMalloc(&outside, 1024) != cudaSuccess)
    std::_Exit(1);
  // Hopper holds at most 32 blocks per multiprocessor, so 33 per multiprocessor never all fit.
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess) std::_Exit(1);
  const unsigned blocks = failure == Failure::kTooManyBlocks     ? 513
                          : failure == Failure::kGridNotResident ? 33u * sms
                                                                 : 1;
  const iris::Barriers bars = ctx->make_barriers(2);
  // A handle as a rank outside the team would hold it (rank 0 of a team that starts at 1).
  const iris::device::Barriers others(bars.device().slots(0), iris::team{1, 1, 1}, 2, 32,
                                      ctx->rank());
  const unsigned threads = failure == Failure::kTooManyWarpGroups ? 576 : 32;
  fail<<<blocks, threads>>>(ctx->device(), failure, flag, floats, outside, bars.device(), others);
  cudaDeviceSynchronize();
  try {
    ctx->check_device_errors();
  } catch (const iris::Error& error) {
    std::printf("%s|%s\n", error.code() == iris::Errc::kDeviceTimeout ? "timeout" : "misuse",
                error.message().c_str());
    std::fflush(stdout);
    std::_Exit(3);
  }
  std::_Exit(2);
}

TEST(ReportChild, Run) {
  const char* which = std::getenv(kFailureVariable);
  if (which == nullptr) GTEST_SKIP() << "runs only as the child of a DeviceReports test";
  try {
    report_failure(static_cast<Failure>(std::atoi(which)));
  } catch (const std::exception& error) {  // e.g. no GPU for this process
    std::printf("child failed: %s\n", error.what());
    std::_Exit(1);
  }
}

/// Runs the child for `failure` and returns what it printed.
std::string run_child(Failure failure) {
  return iris_test::run_child_test(
      std::string(kFailureVariable) + "=" + std::to_string(static_cast<int>(failure)),
      "ReportChild.Run");
}

TEST(DeviceReports, WaitTimeoutNamesTheFlagAndTheValues) {
  EXPECT_THAT(run_child(Failure::kTimeout),
              testing::ContainsRegex(
                  "timeout\\|rank 0: wait_until\\(heap offset 0x[0-9a-f]+ on rank 0, eq 3\\) "
                  "timed out after [0-9.]+ ms, observed 0 \\(block 0, thread 0\\)"));
}

TEST(DeviceReports, RankOutsideTheWorld) {
  EXPECT_THAT(run_child(Failure::kBadRank),
              testing::ContainsRegex("misuse\\|rank 0: atomic_add: rank 1 is not in the world "
                                     "of 1 ranks \\(block 0, thread 0\\)"));
}

TEST(DeviceReports, PointerOutsideTheHeap) {
  EXPECT_THAT(run_child(Failure::kOutsideHeap),
              testing::ContainsRegex("misuse\\|rank 0: get: 256 bytes at heap offset -?0x[0-9a-f]+ "
                                     "on rank 0 are not inside the heap of 0x[0-9a-f]+ bytes"));
}

TEST(DeviceReports, TilesOfDifferentShapes) {
  EXPECT_THAT(run_child(Failure::kShapeMismatch),
              testing::ContainsRegex("misuse\\|rank 0: put: the destination tile is 4 x 8, the "
                                     "source tile 4 x 7"));
}

TEST(DeviceReports, BlockBarrierPastItsChannels) {
  EXPECT_THAT(run_child(Failure::kTooManyBlocks),
              testing::ContainsRegex("misuse\\|rank 0: barrier\\(block\\): block 512 is past the "
                                     "512 blocks it supports"));
}

TEST(DeviceReports, GridBarrierOverMoreBlocksThanFitSaysSo) {
  // Block 0 waits for the blocks that never became resident, and they for block 0: whichever
  // times out first reports, and either report names the cause.
  EXPECT_THAT(run_child(Failure::kGridNotResident),
              testing::ContainsRegex(
                  "timeout\\|rank 0: barrier\\(grid\\) timed out after [0-9.]+ ms waiting for "
                  "(the grid's other [0-9]+ blocks, of which [0-9]+ arrived|block 0 to release the "
                  "grid).*; a grid barrier needs every block of the grid resident at once"));
}

TEST(DeviceReports, TranslateIsCheckedToo) {
  EXPECT_THAT(run_child(Failure::kTranslateOutsideHeap),
              testing::ContainsRegex("misuse\\|rank 0: translate: 4294967296 bytes at heap offset "
                                     "0x[0-9a-f]+ on rank 0 are not inside the heap"));
}

TEST(DeviceReports, BarrierChannelPastTheObjectsChannels) {
  EXPECT_THAT(run_child(Failure::kBadChannel),
              testing::ContainsRegex("misuse\\|rank 0: barrier sync: channel 2 is not below the 2 "
                                     "channels the barrier object has"));
}

TEST(DeviceReports, BarrierObjectUsedOutsideItsTeam) {
  EXPECT_THAT(run_child(Failure::kNotInTeam),
              testing::ContainsRegex("misuse\\|rank 0: barrier sync: rank 0 is not a member of the "
                                     "barrier's team \\(1 members, start 1, stride 1\\)"));
}

TEST(DeviceReports, TeamMemberPastTheTeam) {
  EXPECT_THAT(run_child(Failure::kBadMember),
              testing::ContainsRegex("misuse\\|rank 0: translate: member 1 is not in the team of 1 "
                                     "members \\(start 0, stride 1\\) in the world of 1 ranks"));
}

TEST(DeviceReports, NinthWarpsGroupNamesItsIndexAndTheBlock) {
  EXPECT_THAT(run_child(Failure::kTooManyWarpGroups),
              testing::ContainsRegex(
                  "misuse\\|rank 0: signal: iris::warps<2> group 8 has no named barrier to sync "
                  "on \\(blockDim 576 makes 9 groups; warps<N> has ids 8-15 for groups 0-7: give "
                  "the others an iris::warp_span with an id of their own\\) \\(block 0, thread "
                  "5[1-7][0-9]\\)"));
}

}  // namespace
