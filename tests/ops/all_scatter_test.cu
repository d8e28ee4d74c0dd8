// GEMM + all-scatter in every pattern, on every rank, in bf16 and fp16: each rank computes its
// column block of C from small-integer data (so every result is exact in either type) and every
// element of every rank's C is checked against a host reference; runs are repeated and replayed
// from a CUDA graph, and the per-tile arrival flags must count exactly the runs.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <type_traits>
#include <vector>

#include "iris/iris.hpp"
#include "iris/ops/gemm_all_scatter.hpp"
#include "iris/ops/trace.hpp"
#include "ops/common.cuh"

// Named, not anonymous: the test also uses ops_test's unnamed namespace, and nvcc's kernel
// registration cannot tell two of them apart.
namespace all_scatter_test {
__global__ void to_half(const __nv_bfloat16* from, __half* to, std::size_t count) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count;
       i += std::size_t{gridDim.x} * blockDim.x)
    to[i] = __float2half_rn(__bfloat162float(from[i]));
}
}  // namespace all_scatter_test

namespace {

using all_scatter_test::to_half;
using iris::ops::AllScatterPattern;
using iris::ops::DType;
using namespace ops_test;

// A is the same on every rank (the data of "rank" 0), B is each rank's own; with K <= 256 every
// dot product is an integer of magnitude <= 256, which bf16 and fp16 represent exactly.

/// The operands of `p` in T (bf16 or fp16): A of "rank" 0 everywhere, this rank's B.
template <class T>
struct TypedOperands {
  static constexpr DType kType = std::is_same_v<T, __half> ? DType::kF16 : DType::kBF16;
  Operands bf16;
  const void* a = bf16.a;
  const void* b = bf16.b;
  __half *a16 = nullptr, *b16 = nullptr;
  explicit TypedOperands(const Problem& p) : bf16(p, 0, context().rank(), false) {
    if constexpr (kType == DType::kF16) {
      const std::size_t a_count = std::size_t(p.m) * p.k, b_count = std::size_t(p.n) * p.k;
      EXPECT_EQ(cudaMalloc(&a16, sizeof(__half) * a_count), cudaSuccess);
      EXPECT_EQ(cudaMalloc(&b16, sizeof(__half) * b_count), cudaSuccess);
      to_half<<<128, 256>>>(bf16.a, a16, a_count);
      to_half<<<128, 256>>>(bf16.b, b16, b_count);
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      a = a16;
      b = b16;
    }
  }
  TypedOperands(const TypedOperands&) = delete;
  TypedOperands& operator=(const TypedOperands&) = delete;
  ~TypedOperands() {
    cudaFree(a16);
    cudaFree(b16);
  }
};

/// C[i][q * n + j] = sum_k A[i][k] * B_q[j][k].
std::vector<float> reference(const Problem& p, int world) {
  std::vector<float> c(std::size_t(p.m) * p.n * world);
  std::vector<int> b(std::size_t(p.n) * p.k);
  for (int q = 0; q < world; ++q) {
    for (int j = 0; j < p.n; ++j)
      for (int k = 0; k < p.k; ++k) b[std::size_t(j) * p.k + k] = b_value(q, j, k);
    for (int i = 0; i < p.m; ++i) {
      int a[256];
      for (int k = 0; k < p.k; ++k) a[k] = a_value(0, i, k);
      for (int j = 0; j < p.n; ++j) {
        int sum = 0;
        const int* row = &b[std::size_t(j) * p.k];
        for (int k = 0; k < p.k; ++k) sum += a[k] * row[k];
        c[std::size_t(i) * p.n * world + std::size_t(q) * p.n + j] = static_cast<float>(sum);
      }
    }
  }
  return c;
}

/// `gemm_sms`, `comm_blocks`: the SM split of producer-consumer and workgroup-specialized (0:
/// the op's choice). T: the elements of A, B and C (bf16 or fp16).
template <class T = __nv_bfloat16>
void run_pattern(AllScatterPattern pattern, const Problem& p, int gemm_sms = 0,
                 int comm_blocks = 0) {
  iris::Context& ctx = context();
  const int world = ctx.world_size();
  SCOPED_TRACE(std::string(iris::ops::to_string(pattern)) + ", " +
               std::string(iris::ops::to_string(TypedOperands<T>::kType)) +
               ", M = " + std::to_string(p.m) + ", N per rank = " + std::to_string(p.n) +
               ", K = " + std::to_string(p.k) + ", split " + std::to_string(gemm_sms) + " + " +
               std::to_string(comm_blocks));
  const TypedOperands<T> x(p);
  auto c = ctx.zeros<T>(iris::Shape(std::size_t(p.m) * p.n * world));
  const std::vector<float> want = reference(p, world);

  auto args = gemm_arguments<iris::ops::GemmAllScatterArguments>(p, x.a, x.b, c.data(), pattern);
  args.type = TypedOperands<T>::kType;
  args.gemm_sms = gemm_sms;
  args.comm_blocks = comm_blocks;
  ASSERT_TRUE(accepts(iris::ops::GemmAllScatter::can_implement(ctx, args)));
  iris::ops::GemmAllScatter op(ctx);
  op.initialize(args);
  EXPECT_NE(op.pattern(), AllScatterPattern::kAuto);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);

  constexpr int kRuns = 3, kReplays = 3;
  for (int r = 0; r < kRuns; ++r) op.run(stream);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ctx.check_device_errors();
  expect_c(ctx, c, want, "after direct runs");

  // Clear C everywhere, then only graph replays fill it again.
  ASSERT_NO_FATAL_FAILURE(clear_everywhere(ctx, c.data(), c.bytes()));
  ASSERT_NO_FATAL_FAILURE(replay_graph(ctx, stream, kReplays, [&](cudaStream_t s) { op.run(s); }));
  expect_c(ctx, c, want, "after graph replays");

  // Every tile of every member arrived once per run.
  expect_flags(op.tile_flags(), std::size_t(world) * op.tiles_per_block(), kRuns + kReplays);

  ctx.barrier();
  cudaStreamDestroy(stream);
}

const Problem kRagged{300, 264, 136};  // ragged tiles in M and N, K not a multiple of 64
const Problem kLarger{1024, 768, 256};

TEST(GemmAllScatter, BulkSynchronous) {
  run_pattern(AllScatterPattern::kBulkSynchronous, kRagged);
  run_pattern(AllScatterPattern::kBulkSynchronous, kLarger);
}

TEST(GemmAllScatter, FusedSequential) {
  run_pattern(AllScatterPattern::kFusedSequential, kRagged);
  run_pattern(AllScatterPattern::kFusedSequential, kLarger);
}

TEST(GemmAllScatter, ProducerConsumer) {
  run_pattern(AllScatterPattern::kProducerConsumer, kRagged);
  run_pattern(AllScatterPattern::kProducerConsumer, kLarger);
}

TEST(GemmAllScatter, ProducerConsumerWithFewBlocks) {
  run_pattern(AllScatterPattern::kProducerConsumer, kLarger, 2, 1);
}

// One kernel of GEMM blocks and senders. With 2 GEMM blocks over kLarger's 24 tiles each GEMM
// block computes 12: a scheduler that strided by the whole grid (senders included) would skip
// tiles, whose flags would then never rise (the senders' bounded waits fail the run).
TEST(GemmAllScatter, WorkgroupSpecialized) {
  run_pattern(AllScatterPattern::kWorkgroupSpecialized, kRagged);
  run_pattern(AllScatterPattern::kWorkgroupSpecialized, kLarger);
}

TEST(GemmAllScatter, WorkgroupSpecializedSplits) {
  run_pattern(AllScatterPattern::kWorkgroupSpecialized, kLarger, 2, 2);  // many tiles per block
  run_pattern(AllScatterPattern::kWorkgroupSpecialized, kLarger, 4, 8);  // more senders
  run_pattern(AllScatterPattern::kWorkgroupSpecialized, kRagged, 6, 3);  // 3 -> 4 senders
}

TEST(GemmAllScatter, AutoPicksAPattern) {
  run_pattern(AllScatterPattern::kAuto, kRagged);
}

// fp16 in and out: the same patterns on the fp16 kernels (plain GEMM, tile-store epilogue,
// workgroup-specialized), a ragged shape and a larger one each.
TEST(GemmAllScatter, Fp16EveryPattern) {
  for (const auto pattern :
       {AllScatterPattern::kBulkSynchronous, AllScatterPattern::kFusedSequential,
        AllScatterPattern::kProducerConsumer, AllScatterPattern::kWorkgroupSpecialized}) {
    run_pattern<__half>(pattern, kRagged);
    run_pattern<__half>(pattern, kLarger);
  }
  run_pattern<__half>(AllScatterPattern::kWorkgroupSpecialized, kLarger, 2, 2);  // 12 tiles each
  run_pattern<__half>(AllScatterPattern::kAuto, kRagged);
}

// Tracing: every tile of this rank has its gemm_tile, store and signal events (fused) or wait
// and push events (producer-consumer, workgroup-specialized), each well-formed and in order; the
// merged JSON names every rank.
template <class T = __nv_bfloat16>
void expect_trace(AllScatterPattern pattern) {
  iris::Context& ctx = context();
  const Problem p{512, 512, 128};
  const int world = ctx.world_size();
  const TypedOperands<T> x(p);
  auto c = ctx.zeros<T>(iris::Shape(std::size_t(p.m) * p.n * world));
  iris::ops::Tracer tracer;
  auto args = gemm_arguments<iris::ops::GemmAllScatterArguments>(p, x.a, x.b, c.data(), pattern);
  args.type = TypedOperands<T>::kType;
  args.trace = &tracer;
  iris::ops::GemmAllScatter op(ctx);
  op.initialize(args);
  constexpr int kRuns = 2;
  for (int r = 0; r < kRuns; ++r) op.run();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  expect_c(ctx, c, reference(p, world), "traced");
  const auto events = tracer.events();
  EXPECT_EQ(tracer.dropped(), 0u);
  std::vector<int> per_kind(5, 0);
  for (const auto& e : events) {
    EXPECT_EQ(e.rank, ctx.rank());
    EXPECT_LE(e.start_ns, e.end_ns) << to_string(e.kind) << " of tile " << e.tile;
    EXPECT_GE(e.tile, 0);
    EXPECT_LT(e.tile, op.tiles_per_block());
    ++per_kind[static_cast<int>(e.kind)];
  }
  const int tiles = op.tiles_per_block() * kRuns;
  using K = iris::ops::TraceKind;
  if (pattern == AllScatterPattern::kFusedSequential) {
    EXPECT_EQ(per_kind[int(K::kGemmTile)], tiles);
    EXPECT_EQ(per_kind[int(K::kStore)], tiles);
    EXPECT_EQ(per_kind[int(K::kSignal)], tiles);
    // A tile's store starts where its computation ended (the same thread's clock reading).
    for (const auto& store : events) {
      if (store.kind != K::kStore) continue;
      int computed = 0;
      for (const auto& gemm : events)
        computed += gemm.kind == K::kGemmTile && gemm.tile == store.tile && gemm.sm == store.sm &&
                    gemm.end_ns == store.start_ns;
      EXPECT_EQ(computed, 1) << "store of tile " << store.tile << " has no gemm_tile before it";
    }
  } else {
    EXPECT_EQ(per_kind[int(K::kWait)], tiles);
    EXPECT_EQ(per_kind[int(K::kPush)], tiles);
    EXPECT_EQ(per_kind[int(K::kStore)], tiles);  // the GEMM's local stores
  }
  const std::string path =
      std::string(IRIS_TEST_BINARY_DIR) + "/ops_trace_n" + std::to_string(world) + ".json";
  tracer.write_json(ctx, path);
  if (ctx.rank() == 0) {
    std::ifstream in(path);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text.rfind("{\"traceEvents\": [", 0), 0u);
    for (int r = 0; r < world; ++r)
      EXPECT_THAT(text, testing::HasSubstr("\"name\": \"rank " + std::to_string(r) + "\""));
    EXPECT_THAT(text, testing::HasSubstr("\"ph\": \"X\""));
    EXPECT_NE(text.find("], \"displayTimeUnit\""), std::string::npos) << "truncated trace";
  }
  ctx.barrier();
}

TEST(GemmAllScatter, TraceOfFusedSequential) {
  expect_trace(AllScatterPattern::kFusedSequential);
}

TEST(GemmAllScatter, TraceOfProducerConsumer) {
  expect_trace(AllScatterPattern::kProducerConsumer);
}

TEST(GemmAllScatter, TraceOfWorkgroupSpecialized) {
  expect_trace(AllScatterPattern::kWorkgroupSpecialized);
}

TEST(GemmAllScatter, TraceOfFp16) {
  expect_trace<__half>(AllScatterPattern::kFusedSequential);
  expect_trace<__half>(AllScatterPattern::kWorkgroupSpecialized);
}

TEST(GemmAllScatter, CanImplementRefusesWhatItCannotRun) {
  iris::Context& ctx = context();
  const LocalMemory local;
  // Every tensor in local memory: c is not symmetric.
  auto args = local_gemm_arguments<iris::ops::GemmAllScatterArguments>(128, local);
  EXPECT_TRUE(refuses(iris::ops::GemmAllScatter::can_implement(ctx, args), "symmetric"));
  auto c = ctx.zeros<__nv_bfloat16>(iris::Shape(std::size_t(128) * 256 * ctx.world_size()));
  args.c = c.data();
  EXPECT_TRUE(accepts(iris::ops::GemmAllScatter::can_implement(ctx, args)));
  args.k = 60;
  EXPECT_TRUE(refuses(iris::ops::GemmAllScatter::can_implement(ctx, args), "K = 60"));
  args.k = 64;
  args.m = 1 << 20;  // C (and the heap) too small for this M
  EXPECT_TRUE(
      refuses(iris::ops::GemmAllScatter::can_implement(ctx, args), "inside the symmetric heap"));
  args.type = DType::kF16;
  EXPECT_TRUE(refuses(iris::ops::GemmAllScatter::can_implement(ctx, args),
                      {"fp16 elements", "inside the symmetric heap"}));
  args.m = 128;
  args.type = DType::kF16;  // fp16 in and out: every pattern has its kernels
  EXPECT_TRUE(accepts(iris::ops::GemmAllScatter::can_implement(ctx, args)));
  args.type = DType::kF32;  // no fp32 kernel
  EXPECT_TRUE(refuses(iris::ops::GemmAllScatter::can_implement(ctx, args),
                      {"element type is fp32", "bf16 or fp16"}));
  args.type = DType::kBF16;
  args.pattern = AllScatterPattern::kWorkgroupSpecialized;
  args.gemm_sms = 1;
  EXPECT_TRUE(refuses(iris::ops::GemmAllScatter::can_implement(ctx, args), "gemm_sms = 1"));
  args.gemm_sms = 0;
  args.comm_blocks = -2;
  EXPECT_TRUE(refuses(iris::ops::GemmAllScatter::can_implement(ctx, args), "comm_blocks"));
  args.comm_blocks = 0;
  args.pattern = AllScatterPattern::kAuto;
  args.team = iris::team{ctx.rank() == 0 ? 1 : 0, 1, 1};  // a team without this rank
  EXPECT_TRUE(refuses(iris::ops::GemmAllScatter::can_implement(ctx, args), "not a member"));
  iris::ops::GemmAllScatter op(ctx);
  args.team = {};
  args.k = 60;
  EXPECT_THROW(op.initialize(args), iris::Error);
  ctx.barrier();
}

}  // namespace
