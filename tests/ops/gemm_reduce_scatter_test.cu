// GEMM + reduce-scatter in every pattern, on every rank: each rank multiplies its K shard, and
// every element of every rank's rows of the sum is checked against a host reference
// (small-integer data, so that every partial and every sum is exact in bf16); runs are repeated
// and replayed from a CUDA graph into a cleared C, and the fused pattern's per-(tile, source)
// arrival flags must count exactly the runs. On data whose sums round, the two patterns must
// agree value for value and repeated runs bit for bit.
#include <cuda_bf16.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "iris/iris.hpp"
#include "iris/ops/gemm_reduce_scatter.hpp"
#include "iris/ops/trace.hpp"
#include "mp/common.cuh"

namespace {

using iris::ops::ReduceScatterPattern;
using iris_test::context;

// Values in {-1, 0, 1}: with K_r * ranks <= 256 every partial and every sum is an integer of
// magnitude <= 256, which bf16 represents exactly.
__host__ __device__ int a_value(int rank, int i, int k) {
  return (i * 7 + k * 3 + rank * 5) % 3 - 1;
}
__host__ __device__ int b_value(int rank, int j, int k) {
  return (j * 5 + k + rank * 11) % 3 - 1;
}
// Values whose products and sums round in bf16 (multiples of 1/8 up to 1).
__host__ __device__ float a_rounding(int rank, int i, int k) {
  return static_cast<float>((i * 13 + k * 7 + rank * 3) % 17 - 8) / 8.0f;
}
__host__ __device__ float b_rounding(int rank, int j, int k) {
  return static_cast<float>((j * 11 + k * 5 + rank * 7) % 15 - 7) / 8.0f;
}

__global__ void fill(__nv_bfloat16* a, __nv_bfloat16* b, int m, int n, int k, int rank,
                     bool rounding) {
  for (int x = blockIdx.x * blockDim.x + threadIdx.x; x < m * k || x < n * k;
       x += gridDim.x * blockDim.x) {
    if (x < m * k)
      a[x] = rounding ? __float2bfloat16_rn(a_rounding(rank, x / k, x % k))
                      : __int2bfloat16_rn(a_value(rank, x / k, x % k));
    if (x < n * k)
      b[x] = rounding ? __float2bfloat16_rn(b_rounding(rank, x / k, x % k))
                      : __int2bfloat16_rn(b_value(rank, x / k, x % k));
  }
}

struct Problem {
  int m, n, k;  // k: per rank
};

/// This rank's rows of C = sum over ranks q of A_q * B_q^T.
std::vector<float> reference(const Problem& p, int world, int rank) {
  const int rows = p.m / world;
  std::vector<float> c(std::size_t(rows) * p.n, 0.0f);
  for (int q = 0; q < world; ++q)
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < p.n; ++j) {
        int sum = 0;
        for (int k = 0; k < p.k; ++k) sum += a_value(q, rank * rows + i, k) * b_value(q, j, k);
        c[std::size_t(i) * p.n + j] += static_cast<float>(sum);
      }
  return c;
}

void expect_c(iris::Context& ctx, const iris::Buffer<__nv_bfloat16>& c,
              const std::vector<float>& want, const char* when) {
  const auto got = c.to_host();
  ASSERT_EQ(got.size(), want.size());
  std::size_t wrong = 0, first = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (__bfloat162float(got[i]) != want[i] && wrong++ == 0) first = i;
  }
  EXPECT_EQ(wrong, 0u) << "rank " << ctx.rank() << ", " << when << ": " << wrong
                       << " wrong elements; first at " << first << ": "
                       << __bfloat162float(got[first]) << " instead of " << want[first];
}

struct Operands {
  __nv_bfloat16 *a = nullptr, *b = nullptr;
  Operands(const Problem& p, int rank, bool rounding) {
    EXPECT_EQ(cudaMalloc(&a, sizeof(__nv_bfloat16) * p.m * p.k), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&b, sizeof(__nv_bfloat16) * p.n * p.k), cudaSuccess);
    fill<<<128, 256>>>(a, b, p.m, p.n, p.k, rank, rounding);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  ~Operands() {
    cudaFree(a);
    cudaFree(b);
  }
};

iris::ops::GemmReduceScatterArguments arguments(const Problem& p, const Operands& x, void* c,
                                                ReduceScatterPattern pattern) {
  iris::ops::GemmReduceScatterArguments args;
  args.m = p.m;
  args.n = p.n;
  args.k = p.k;
  args.a = x.a;
  args.b = x.b;
  args.c = c;
  args.pattern = pattern;
  return args;
}

void run_pattern(ReduceScatterPattern pattern, const Problem& p) {
  iris::Context& ctx = context();
  const int world = ctx.world_size();
  SCOPED_TRACE(std::string(iris::ops::to_string(pattern)) + ", M = " + std::to_string(p.m) +
               ", N = " + std::to_string(p.n) + ", K per rank = " + std::to_string(p.k));
  const Operands x(p, ctx.rank(), false);
  auto c = ctx.zeros<__nv_bfloat16>(iris::Shape(std::size_t(p.m / world) * p.n));
  const std::vector<float> want = reference(p, world, ctx.rank());

  const auto args = arguments(p, x, c.data(), pattern);
  const auto status = iris::ops::GemmReduceScatter::can_implement(ctx, args);
  ASSERT_TRUE(status) << status.message;
  iris::ops::GemmReduceScatter op(ctx);
  op.initialize(args);
  EXPECT_NE(op.pattern(), ReduceScatterPattern::kAuto);
  if (pattern != ReduceScatterPattern::kAuto) EXPECT_EQ(op.pattern(), pattern);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);

  constexpr int kRuns = 3, kReplays = 3;
  for (int r = 0; r < kRuns; ++r) op.run(stream);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ctx.check_device_errors();
  expect_c(ctx, c, want, "after direct runs");

  // Clear C everywhere, then only graph replays fill it again.
  ctx.barrier();
  ASSERT_EQ(cudaMemset(c.data(), 0, c.bytes()), cudaSuccess);
  ctx.barrier();
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  op.run(stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int r = 0; r < kReplays; ++r) ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ctx.check_device_errors();
  expect_c(ctx, c, want, "after graph replays");

  if (op.pattern() == ReduceScatterPattern::kFusedSequential) {
    // Every member sent each tile of this rank's rows once per run.
    EXPECT_EQ(op.tiles_per_block(),
              (p.m / world / op.tile_m()) * ((p.n + op.tile_n() - 1) / op.tile_n()));
    std::vector<std::uint64_t> flags(std::size_t(world) * op.tiles_per_block());
    ASSERT_EQ(cudaMemcpy(flags.data(), op.tile_flags(), flags.size() * sizeof(std::uint64_t),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_THAT(flags, testing::Each(std::uint64_t{kRuns + kReplays}));
  }

  ctx.barrier();
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// Exact data: |sum| <= K * world <= 256. K = 104, 40, 8 for 2, 4, 8 ranks (a multiple of 8,
// for 2 ranks neither below nor a multiple of the 64-deep k-tile).
int exact_k(int world) {
  return 256 / world - 24;
}
// Fused needs M / world to be whole 128-row tiles; N ragged (264 = 256 + 8).
Problem aligned(int world) {
  return {256 * world, 264, exact_k(world)};
}
Problem larger(int world) {
  return {512 * world, 768, exact_k(world)};
}
// 300, 150, 75 rows per rank at 2, 4, 8 ranks: ragged tiles, not whole tiles per rank.
Problem unaligned(int) {
  return {600, 264, 32};  // 32 * 8 ranks = 256
}

TEST(GemmReduceScatter, BulkSynchronous) {
  const int world = context().world_size();
  run_pattern(ReduceScatterPattern::kBulkSynchronous, unaligned(world));
  run_pattern(ReduceScatterPattern::kBulkSynchronous, aligned(world));
  run_pattern(ReduceScatterPattern::kBulkSynchronous, larger(world));
}

TEST(GemmReduceScatter, FusedSequential) {
  const int world = context().world_size();
  run_pattern(ReduceScatterPattern::kFusedSequential, aligned(world));
  run_pattern(ReduceScatterPattern::kFusedSequential, larger(world));
}

TEST(GemmReduceScatter, AutoPicksByRowBlocks) {
  iris::Context& ctx = context();
  const int world = ctx.world_size();
  for (const Problem& p : {aligned(world), unaligned(world)}) {
    const Operands x(p, ctx.rank(), false);
    auto c = ctx.zeros<__nv_bfloat16>(iris::Shape(std::size_t(p.m / world) * p.n));
    iris::ops::GemmReduceScatter op(ctx);
    op.initialize(arguments(p, x, c.data(), ReduceScatterPattern::kAuto));
    EXPECT_EQ(op.pattern(), (p.m / world) % 128 == 0 ? ReduceScatterPattern::kFusedSequential
                                                     : ReduceScatterPattern::kBulkSynchronous);
    ctx.barrier();
  }
  run_pattern(ReduceScatterPattern::kAuto, aligned(world));
}

// Rounding data: both patterns round each partial to bf16 once and add the members in fp32 in
// team order, so they agree value for value; repeated runs agree bit for bit.
TEST(GemmReduceScatter, PatternsAgreeWhereSumsRound) {
  iris::Context& ctx = context();
  const int world = ctx.world_size();
  const Problem p{256 * world, 512, 1024};
  const Operands x(p, ctx.rank(), true);
  const std::size_t count = std::size_t(p.m / world) * p.n;
  auto fused_c = ctx.zeros<__nv_bfloat16>(iris::Shape(count));
  auto bulk_c = ctx.zeros<__nv_bfloat16>(iris::Shape(count));
  iris::ops::GemmReduceScatter fused(ctx), bulk(ctx);
  fused.initialize(arguments(p, x, fused_c.data(), ReduceScatterPattern::kFusedSequential));
  bulk.initialize(arguments(p, x, bulk_c.data(), ReduceScatterPattern::kBulkSynchronous));
  fused.run();
  bulk.run();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ctx.check_device_errors();
  const auto first = fused_c.to_host();
  const auto from_bulk = bulk_c.to_host();
  std::size_t differ = 0, nonzero = 0;
  for (std::size_t i = 0; i < count; ++i) {
    differ += __bfloat162float(first[i]) != __bfloat162float(from_bulk[i]);
    nonzero += __bfloat162float(first[i]) != 0.0f;
  }
  EXPECT_EQ(differ, 0u) << "rank " << ctx.rank() << ": fused and bulk-synchronous differ";
  EXPECT_GT(nonzero, count / 2) << "the data should give mostly non-zero sums";
  for (int r = 0; r < 3; ++r) fused.run();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto again = fused_c.to_host();
  EXPECT_EQ(std::memcmp(first.data(), again.data(), count * sizeof(__nv_bfloat16)), 0)
      << "rank " << ctx.rank() << ": repeated fused runs differ";
  ctx.barrier();
}

// Tracing the fused GEMM: every tile of the whole partial product has its gemm_tile, store and
// signal events per run.
TEST(GemmReduceScatter, TraceOfFusedSequential) {
  iris::Context& ctx = context();
  const int world = ctx.world_size();
  const Problem p = aligned(world);
  const Operands x(p, ctx.rank(), false);
  auto c = ctx.zeros<__nv_bfloat16>(iris::Shape(std::size_t(p.m / world) * p.n));
  iris::ops::Tracer tracer;
  auto args = arguments(p, x, c.data(), ReduceScatterPattern::kFusedSequential);
  args.trace = &tracer;
  iris::ops::GemmReduceScatter op(ctx);
  op.initialize(args);
  constexpr int kRuns = 2;
  for (int r = 0; r < kRuns; ++r) op.run();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  expect_c(ctx, c, reference(p, world, ctx.rank()), "traced");
  EXPECT_EQ(tracer.dropped(), 0u);
  const int tiles = op.tiles_per_block() * world;  // the whole M x N partial product
  std::vector<int> per_kind(5, 0);
  for (const auto& e : tracer.events()) {
    EXPECT_LE(e.start_ns, e.end_ns);
    EXPECT_GE(e.tile, 0);
    EXPECT_LT(e.tile, tiles);
    ++per_kind[static_cast<int>(e.kind)];
  }
  using K = iris::ops::TraceKind;
  EXPECT_EQ(per_kind[int(K::kGemmTile)], tiles * kRuns);
  EXPECT_EQ(per_kind[int(K::kStore)], tiles * kRuns);
  EXPECT_EQ(per_kind[int(K::kSignal)], tiles * kRuns);
  ctx.barrier();
}

TEST(GemmReduceScatter, CanImplementRefusesWhatItCannotRun) {
  iris::Context& ctx = context();
  const int world = ctx.world_size();
  using Op = iris::ops::GemmReduceScatter;
  iris::ops::GemmReduceScatterArguments args;
  args.m = 128 * world;
  args.n = 256;
  args.k = 64;
  void* local = nullptr;
  ASSERT_EQ(cudaMalloc(&local, 1 << 20), cudaSuccess);
  args.a = args.b = local;
  args.c = local;  // not symmetric
  EXPECT_THAT(Op::can_implement(ctx, args).message, testing::HasSubstr("symmetric"));
  auto c = ctx.zeros<__nv_bfloat16>(iris::Shape(std::size_t(128) * 256));
  args.c = c.data();
  EXPECT_TRUE(Op::can_implement(ctx, args)) << Op::can_implement(ctx, args).message;
  args.m = 128 * world + 1;  // rows do not split evenly
  EXPECT_THAT(Op::can_implement(ctx, args).message,
              testing::HasSubstr("must be a multiple of the team size"));
  args.m = 64 * world;  // row blocks of half a tile: fused refuses, auto takes bulk-synchronous
  args.pattern = ReduceScatterPattern::kFusedSequential;
  EXPECT_THAT(Op::can_implement(ctx, args).message, testing::HasSubstr("multiple of 128"));
  args.pattern = ReduceScatterPattern::kAuto;
  EXPECT_TRUE(Op::can_implement(ctx, args));
  args.pattern = ReduceScatterPattern::kBulkSynchronous;
  EXPECT_TRUE(Op::can_implement(ctx, args));
  args.m = 128 * world;
  args.k = 60;
  EXPECT_THAT(Op::can_implement(ctx, args).message, testing::HasSubstr("K = 60"));
  args.k = 64;
  args.m = (1 << 20) * world;  // C (and the heap) too small for these rows
  EXPECT_THAT(Op::can_implement(ctx, args).message,
              testing::HasSubstr("inside the symmetric heap"));
  args.m = 128 * world;
  args.team = iris::team{ctx.rank() == 0 ? 1 : 0, 1, 1};  // a team without this rank
  EXPECT_THAT(Op::can_implement(ctx, args).message, testing::HasSubstr("not a member"));
  args.team = iris::team{0, 0, 1};  // size 0: the world
  args.reduce_blocks = -1;
  EXPECT_THAT(Op::can_implement(ctx, args).message, testing::HasSubstr("reduce_blocks"));
  args.reduce_blocks = 0;
  Op op(ctx);
  args.k = 60;
  EXPECT_THROW(op.initialize(args), iris::Error);
  EXPECT_THROW(op.run(), iris::Error);  // never initialized
  cudaFree(local);
  ctx.barrier();
}

}  // namespace
