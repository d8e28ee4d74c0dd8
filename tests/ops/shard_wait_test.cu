// The mainloop wait hook on one GPU, through the shard-waiting GEMM (detail/shard_wait.hpp):
// C = A * B^T where A's row shards are written by the copy engines on a second stream, after
// delays, while the GEMM already runs; each copy is followed by the copy of the run's number
// into the shard's flag. A starts as garbage (bf16 0x7f7f, about 3e38), so a tile that loaded
// its rows before their flag rose would be wrong; every element is checked against a host
// reference (small-integer data: exact). Two runs in a row (the second waits for the next
// epoch), shards that tiles straddle, and a flag that never rises: the wait times out and the
// report names the tile and the shard.
//
// Each case runs in a fresh child process (this binary again, told which case by
// IRIS_SHARD_WAIT_CHILD; support/child_test.hpp says why: a report traps), and this parent never
// makes a CUDA context of its own.
#include <cuda_bf16.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "iris/iris.hpp"
#include "iris/ops/detail/shard_wait.hpp"
#include "support/child_test.hpp"

namespace {

constexpr const char* kChildVariable = "IRIS_SHARD_WAIT_CHILD";

// Rows per shard not a multiple of the 128-row tile: tiles straddle two shards.
constexpr int kShards = 3, kRows = 200, kM = kShards * kRows, kN = 264, kK = 200;

int a_value(int i, int k) {
  return (i * 7 + k * 3) % 3 - 1;
}
int b_value(int j, int k) {
  return (j * 5 + k) % 3 - 1;
}

__global__ void fill(__nv_bfloat16* a, __nv_bfloat16* b) {
  for (int x = blockIdx.x * blockDim.x + threadIdx.x; x < kM * kK; x += gridDim.x * blockDim.x)
    a[x] = __int2bfloat16_rn((x / kK * 7 + x % kK * 3) % 3 - 1);
  for (int x = blockIdx.x * blockDim.x + threadIdx.x; x < kN * kK; x += gridDim.x * blockDim.x)
    b[x] = __int2bfloat16_rn((x / kK * 5 + x % kK) % 3 - 1);
}

#define CHECK_CUDA(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

/// One GPU's operands: A's source (right), A (what the GEMM reads, garbage until copied), B, C,
/// and [flags: kShards][epoch: 1] in the heap.
struct ShardGemm {
  iris::Context ctx;
  iris::Buffer<std::uint64_t> flags;
  __nv_bfloat16 *source = nullptr, *a = nullptr, *b = nullptr, *c = nullptr;
  cudaStream_t stream = nullptr, copies = nullptr;
  std::unique_ptr<iris::ops::detail::ShardWaitGemm> gemm;

  explicit ShardGemm(const iris::ContextOptions& options) : ctx(iris::Context::from_env(options)) {
    flags = ctx.zeros<std::uint64_t>(kShards + 1);
  }
  ~ShardGemm() {
    cudaFree(source);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    if (stream) cudaStreamDestroy(stream);
    if (copies) cudaStreamDestroy(copies);
  }
  std::uint64_t* epoch() { return flags.data() + kShards; }

  /// The GEMM, visiting shard `first` first, on all SMs but two.
  void prepare(int first) {
    CHECK_CUDA(cudaMalloc(&source, sizeof(__nv_bfloat16) * kM * kK));
    CHECK_CUDA(cudaMalloc(&a, sizeof(__nv_bfloat16) * kM * kK));
    CHECK_CUDA(cudaMalloc(&b, sizeof(__nv_bfloat16) * kN * kK));
    CHECK_CUDA(cudaMalloc(&c, sizeof(__nv_bfloat16) * kM * kN));
    fill<<<128, 256>>>(source, b);
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CHECK_CUDA(cudaStreamCreateWithFlags(&copies, cudaStreamNonBlocking));
    int device = 0, sms = 0;
    CHECK_CUDA(cudaGetDevice(&device));
    CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    iris::ops::GemmArguments g{};
    g.m = kM;
    g.n = kN;
    g.k = kK;
    g.a = a;
    g.b = b;
    g.d = c;
    g.sm_count = sms - 2;
    iris::ops::detail::ShardWait wait{};
    wait.ctx = ctx.device();
    wait.flags = flags.data();
    wait.epoch = epoch();
    wait.rows = kRows;
    wait.shards = kShards;
    wait.first_shard = first;
    gemm = iris::ops::detail::make_shard_wait_gemm_bf16();
    ASSERT_TRUE(gemm->can_implement(g)) << gemm->can_implement(g).message;
    gemm->initialize(g, wait, stream);
  }

  /// Run number `run`: A and C back to garbage, the epoch to `run`, then the GEMM on `stream`
  /// while the copy stream, 20 ms of the host apart, copies the shards in `order` and
  /// raises each one's flag (a copy of the epoch); shards not in `order` never come.
  void run(std::uint64_t run, const std::vector<int>& order) {
    CHECK_CUDA(cudaMemsetAsync(a, 0x7f, sizeof(__nv_bfloat16) * kM * kK, stream));
    CHECK_CUDA(cudaMemsetAsync(c, 0x7f, sizeof(__nv_bfloat16) * kM * kN, stream));
    CHECK_CUDA(cudaMemcpyAsync(epoch(), &run, sizeof(run), cudaMemcpyHostToDevice, stream));
    cudaEvent_t ready;
    CHECK_CUDA(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    CHECK_CUDA(cudaEventRecord(ready, stream));
    CHECK_CUDA(cudaStreamWaitEvent(copies, ready, 0));
    CHECK_CUDA(cudaEventDestroy(ready));
    gemm->run(stream);
    for (int q : order) {
      // The delay is the host's, before it enqueues the copies: a delay kernel on the copy
      // stream would need an SM, and nothing the waiting GEMM depends on may need one.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the GEMM is waiting by then
      const std::size_t offset = std::size_t(q) * kRows * kK;
      CHECK_CUDA(cudaMemcpyAsync(a + offset, source + offset, sizeof(__nv_bfloat16) * kRows * kK,
                                 cudaMemcpyDeviceToDevice, copies));
      CHECK_CUDA(cudaMemcpyAsync(flags.data() + q, epoch(), sizeof(std::uint64_t),
                                 cudaMemcpyDeviceToDevice, copies));
    }
  }

  void expect_c() {
    std::vector<__nv_bfloat16> got(std::size_t(kM) * kN);
    ASSERT_EQ(cudaMemcpy(got.data(), c, got.size() * sizeof(got[0]), cudaMemcpyDeviceToHost),
              cudaSuccess);
    long wrong = 0;
    for (int i = 0; i < kM; ++i)
      for (int j = 0; j < kN; ++j) {
        int sum = 0;
        for (int k = 0; k < kK; ++k) sum += a_value(i, k) * b_value(j, k);
        const float value = __bfloat162float(got[std::size_t(i) * kN + j]);
        if (value != static_cast<float>(sum) && wrong++ == 0)
          ADD_FAILURE() << "C(" << i << ", " << j << ") = " << value << ", want " << sum;
      }
    EXPECT_EQ(wrong, 0) << "elements of C are wrong";
  }
};

iris::ContextOptions options(std::chrono::milliseconds timeout) {
  iris::ContextOptions o;
  o.heap_size = std::size_t{64} << 20;
  o.wait_timeout = timeout;
  return o;
}

bool is_child() {
  return std::getenv(kChildVariable) != nullptr;
}

// ---- The children ---------------------------------------------------------------------------

TEST(ShardWaitChild, ShardsArriveWhileTheGemmRuns) {
  if (!is_child()) GTEST_SKIP() << "runs only as the child of a ShardWait test";
  ShardGemm s(options(std::chrono::seconds(20)));
  ASSERT_NO_FATAL_FAILURE(s.prepare(1));
  ASSERT_NO_FATAL_FAILURE(s.run(1, {1, 2, 0}));  // the order the GEMM visits them
  CHECK_CUDA(cudaDeviceSynchronize());
  s.ctx.check_device_errors();
  ASSERT_NO_FATAL_FAILURE(s.expect_c());
  // The next run waits for the next epoch: the flags still hold 1.
  ASSERT_NO_FATAL_FAILURE(s.run(2, {0, 2, 1}));  // and not in the GEMM's order
  CHECK_CUDA(cudaDeviceSynchronize());
  s.ctx.check_device_errors();
  ASSERT_NO_FATAL_FAILURE(s.expect_c());
  std::vector<std::uint64_t> flags(kShards + 1);
  CHECK_CUDA(cudaMemcpy(flags.data(), s.flags.data(), flags.size() * sizeof(std::uint64_t),
                        cudaMemcpyDeviceToHost));
  EXPECT_THAT(flags, testing::ElementsAre(2u, 2u, 2u, 2u));
}

/// Shard 2 never comes: a tile with rows of it times out; prints "timeout|<message>".
TEST(ShardWaitChild, FlagThatNeverRises) {
  if (!is_child()) GTEST_SKIP() << "runs only as the child of a ShardWait test";
  ShardGemm s(options(std::chrono::milliseconds(300)));
  ASSERT_NO_FATAL_FAILURE(s.prepare(0));
  ASSERT_NO_FATAL_FAILURE(s.run(1, {0, 1}));
  (void)cudaDeviceSynchronize();
  try {
    s.ctx.check_device_errors();
  } catch (const iris::Error& error) {
    std::printf("%s|%s\n", error.code() == iris::Errc::kDeviceTimeout ? "timeout" : "other",
                error.message().c_str());
    std::fflush(stdout);
    std::_Exit(3);
  }
  std::printf("no report\n");
  std::fflush(stdout);
  std::_Exit(2);
}

// ---- The parent -----------------------------------------------------------------------------

/// Runs this binary's child test `name` and returns what it printed.
std::string run_child(const std::string& name) {
  return iris_test::run_child_test(std::string(kChildVariable) + "=1", "ShardWaitChild." + name);
}

TEST(ShardWait, TilesWaitForTheirShards) {
  if (is_child()) GTEST_SKIP();
  const std::string output = run_child("ShardsArriveWhileTheGemmRuns");
  EXPECT_THAT(output, testing::HasSubstr("[  PASSED  ] 1 test")) << output;
}

TEST(ShardWait, TimeoutNamesTheTileAndTheShard) {
  if (is_child()) GTEST_SKIP();
  // Rows 400..599 are shard 2: m blocks 3 (rows 384..511, straddling shards 1 and 2) and 4.
  EXPECT_THAT(run_child("FlagThatNeverRises"),
              testing::ContainsRegex(
                  "timeout\\|rank 0: tile m[34] n[0-9]+ shard 2\\(heap offset 0x[0-9a-f]+ on "
                  "rank 0, ge 1\\) timed out after [0-9.]+ ms, observed 0 \\(block [0-9(),]+, "
                  "thread 0\\)"));
}

}  // namespace
