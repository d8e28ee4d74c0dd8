// GEMM + reduce-scatter in every pattern, on every rank: each rank multiplies its K shard, and
// every element of every rank's rows of the sum is checked against a host reference
// (small-integer data, so that every partial and every sum is exact in bf16). Runs follow each
// other on the stream with the operands refreshed before each (another seed each run, one rank
// late each time), so a run must add this run's partials of every member and no member may
// overwrite a partial another still reads; runs are replayed from a CUDA graph into a cleared C,
// and the fused pattern's per-(tile, source) arrival flags and the per-tile flags of
// producer-consumer and workgroup-specialized must count exactly the runs. On data whose sums
// round, the patterns must agree value for value (fused, producer-consumer and
// workgroup-specialized bit for bit) and repeated runs bit for bit.
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
#include "ops/common.cuh"

namespace {

using iris::ops::ReduceScatterPattern;
using namespace ops_test;

/// This rank's rows of C = sum over ranks q of A_q * B_q^T (K: per rank), of the data of `seed`.
std::vector<float> reference(const Problem& p, int world, int rank, int seed = 0) {
  const int rows = p.m / world;
  std::vector<float> c(std::size_t(rows) * p.n, 0.0f);
  for (int q = 0; q < world; ++q)
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < p.n; ++j) {
        int sum = 0;
        for (int k = 0; k < p.k; ++k)
          sum += a_value(q, rank * rows + i, k, seed) * b_value(q, j, k, seed);
        c[std::size_t(i) * p.n + j] += static_cast<float>(sum);
      }
  return c;
}

iris::ops::GemmReduceScatterArguments arguments(const Problem& p, const Operands& x, void* c,
                                                ReduceScatterPattern pattern) {
  return gemm_arguments<iris::ops::GemmReduceScatterArguments>(p, x.a, x.b, c, pattern);
}

/// Tiles of the whole M x N partial product: the flags of producer-consumer and
/// workgroup-specialized, and the traced events.
int partial_tiles(const Problem& p, const iris::ops::GemmReduceScatter& op) {
  return ((p.m + op.tile_m() - 1) / op.tile_m()) * op.tiles_n();
}

void run_pattern(ReduceScatterPattern pattern, const Problem& p, int reduce_blocks = 0) {
  iris::Context& ctx = context();
  const int world = ctx.world_size();
  SCOPED_TRACE(std::string(iris::ops::to_string(pattern)) + ", M = " + std::to_string(p.m) +
               ", N = " + std::to_string(p.n) + ", K per rank = " + std::to_string(p.k) +
               ", reduce_blocks " + std::to_string(reduce_blocks));
  const Operands x(p, ctx.rank(), false);
  const std::size_t count = std::size_t(p.m / world) * p.n;
  auto c = ctx.zeros<__nv_bfloat16>(iris::Shape(count));

  iris::ops::GemmReduceScatter op(ctx);
  auto args = arguments(p, x, c.data(), pattern);
  args.reduce_blocks = reduce_blocks;
  ASSERT_NO_FATAL_FAILURE(initialize_checked(ctx, op, args));
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);

  // Back-to-back runs, each on fresh operands, one member late each time; each run's rows are
  // kept (copied on the stream) and checked at the end.
  constexpr int kRuns = 3, kReplays = 3;
  {
    const RunCopies<__nv_bfloat16> kept(count, kRuns);
    for (int r = 0; r < kRuns; ++r) {
      if (ctx.rank() == r % world) delay<<<1, 1, 0, stream>>>(2'000'000);
      x.refill(r, false, stream);
      op.run(stream);
      ASSERT_EQ(kept.keep(r, c.data(), stream), cudaSuccess);
    }
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    ctx.check_device_errors();
    for (int r = 0; r < kRuns; ++r)
      expect_c(ctx, kept.to_host(r), reference(p, world, ctx.rank(), r),
               "run " + std::to_string(r));
  }

  // Clear C everywhere, then only graph replays fill it again (operands of the last run).
  ASSERT_NO_FATAL_FAILURE(clear_everywhere(ctx, c.data(), c.bytes()));
  ASSERT_NO_FATAL_FAILURE(replay_graph(ctx, stream, kReplays, [&](cudaStream_t s) { op.run(s); }));
  expect_c(ctx, c, reference(p, world, ctx.rank(), kRuns - 1), "after graph replays");

  if (op.pattern() == ReduceScatterPattern::kFusedSequential) {
    // Every member sent each tile of this rank's rows once per run.
    EXPECT_EQ(op.tiles_per_block(),
              (p.m / world / op.tile_m()) * ((p.n + op.tile_n() - 1) / op.tile_n()));
    expect_flags(op.tile_flags(), std::size_t(world) * op.tiles_per_block(), kRuns + kReplays);
  } else if (op.pattern() == ReduceScatterPattern::kProducerConsumer ||
             op.pattern() == ReduceScatterPattern::kWorkgroupSpecialized) {
    // This rank's GEMM stored each tile of its whole partial product once per run.
    EXPECT_EQ(op.tiles_n(), (p.n + op.tile_n() - 1) / op.tile_n());
    expect_flags(op.tile_flags(), std::size_t(partial_tiles(p, op)), kRuns + kReplays);
  }

  ctx.barrier();
  cudaStreamDestroy(stream);
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

// Producer-consumer and workgroup-specialized take any M that splits into the team's row blocks
// (a tile may hold rows of two members: each reducer sums only its own); one reducer block (one
// cluster of two, workgroup-specialized) takes every tile in turn.
void run_pulling(ReduceScatterPattern pattern) {
  const int world = context().world_size();
  run_pattern(pattern, unaligned(world));
  run_pattern(pattern, aligned(world));
  run_pattern(pattern, larger(world));
  run_pattern(pattern, unaligned(world), 1);
}

TEST(GemmReduceScatter, ProducerConsumer) {
  run_pulling(ReduceScatterPattern::kProducerConsumer);
}

// And reducer blocks asked past the launch's budget: cut to the budget less one cluster, the
// GEMM keeps one cluster (a grid that could not be resident at once could deadlock).
TEST(GemmReduceScatter, WorkgroupSpecialized) {
  run_pulling(ReduceScatterPattern::kWorkgroupSpecialized);
  run_pattern(ReduceScatterPattern::kWorkgroupSpecialized, unaligned(context().world_size()),
              100000);
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

// Rounding data: every pattern rounds each partial to bf16 once and adds the members in fp32 in
// team order, so they agree value for value (fused, producer-consumer and workgroup-specialized
// share the reduction's arithmetic: bit for bit); repeated runs agree bit for bit.
TEST(GemmReduceScatter, PatternsAgreeWhereSumsRound) {
  iris::Context& ctx = context();
  const int world = ctx.world_size();
  const Problem p{256 * world, 512, 1024};
  const Operands x(p, ctx.rank(), true);
  const std::size_t count = std::size_t(p.m / world) * p.n;
  auto fused_c = ctx.zeros<__nv_bfloat16>(iris::Shape(count));
  auto bulk_c = ctx.zeros<__nv_bfloat16>(iris::Shape(count));
  auto pulled_c = ctx.zeros<__nv_bfloat16>(iris::Shape(count));
  auto specialized_c = ctx.zeros<__nv_bfloat16>(iris::Shape(count));
  iris::ops::GemmReduceScatter fused(ctx), bulk(ctx), pulled(ctx), specialized(ctx);
  fused.initialize(arguments(p, x, fused_c.data(), ReduceScatterPattern::kFusedSequential));
  bulk.initialize(arguments(p, x, bulk_c.data(), ReduceScatterPattern::kBulkSynchronous));
  pulled.initialize(arguments(p, x, pulled_c.data(), ReduceScatterPattern::kProducerConsumer));
  specialized.initialize(
      arguments(p, x, specialized_c.data(), ReduceScatterPattern::kWorkgroupSpecialized));
  fused.run();
  bulk.run();
  pulled.run();
  specialized.run();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ctx.check_device_errors();
  const auto first = fused_c.to_host();
  const auto from_bulk = bulk_c.to_host();
  const auto from_pulled = pulled_c.to_host();
  const auto from_specialized = specialized_c.to_host();
  std::size_t differ = 0, nonzero = 0;
  for (std::size_t i = 0; i < count; ++i) {
    differ += __bfloat162float(first[i]) != __bfloat162float(from_bulk[i]);
    nonzero += __bfloat162float(first[i]) != 0.0f;
  }
  EXPECT_EQ(differ, 0u) << "rank " << ctx.rank() << ": fused and bulk-synchronous differ";
  EXPECT_GT(nonzero, count / 2) << "the data should give mostly non-zero sums";
  EXPECT_EQ(std::memcmp(first.data(), from_pulled.data(), count * sizeof(__nv_bfloat16)), 0)
      << "rank " << ctx.rank() << ": fused and producer-consumer differ";
  EXPECT_EQ(std::memcmp(first.data(), from_specialized.data(), count * sizeof(__nv_bfloat16)), 0)
      << "rank " << ctx.rank() << ": fused and workgroup-specialized differ";
  for (int r = 0; r < 3; ++r) {
    fused.run();
    pulled.run();
    specialized.run();
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(std::memcmp(first.data(), fused_c.to_host().data(), count * sizeof(__nv_bfloat16)), 0)
      << "rank " << ctx.rank() << ": repeated fused runs differ";
  EXPECT_EQ(std::memcmp(first.data(), pulled_c.to_host().data(), count * sizeof(__nv_bfloat16)), 0)
      << "rank " << ctx.rank() << ": repeated producer-consumer runs differ";
  EXPECT_EQ(
      std::memcmp(first.data(), specialized_c.to_host().data(), count * sizeof(__nv_bfloat16)), 0)
      << "rank " << ctx.rank() << ": repeated workgroup-specialized runs differ";
  ctx.barrier();
}

// Tracing a pattern's tile-store GEMM: every tile of the whole partial product has its
// gemm_tile, store and signal events per run (producer-consumer and workgroup-specialized store
// them here only).
void expect_traced(ReduceScatterPattern pattern, const Problem& p) {
  iris::Context& ctx = context();
  const int world = ctx.world_size();
  SCOPED_TRACE(std::string(iris::ops::to_string(pattern)) + ", M = " + std::to_string(p.m));
  const Operands x(p, ctx.rank(), false);
  auto c = ctx.zeros<__nv_bfloat16>(iris::Shape(std::size_t(p.m / world) * p.n));
  iris::ops::Tracer tracer;
  auto args = arguments(p, x, c.data(), pattern);
  args.trace = &tracer;
  iris::ops::GemmReduceScatter op(ctx);
  op.initialize(args);
  constexpr int kRuns = 2;
  for (int r = 0; r < kRuns; ++r) op.run();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  expect_c(ctx, c, reference(p, world, ctx.rank()), "traced");
  expect_tile_events(tracer, partial_tiles(p, op), kRuns);
  ctx.barrier();
}

TEST(GemmReduceScatter, TraceOfFusedSequential) {
  expect_traced(ReduceScatterPattern::kFusedSequential, aligned(context().world_size()));
}

// Ragged row blocks: a tile of two members' rows is still stored once.
TEST(GemmReduceScatter, TraceOfProducerConsumer) {
  expect_traced(ReduceScatterPattern::kProducerConsumer, unaligned(context().world_size()));
}

TEST(GemmReduceScatter, TraceOfWorkgroupSpecialized) {
  expect_traced(ReduceScatterPattern::kWorkgroupSpecialized, unaligned(context().world_size()));
}

TEST(GemmReduceScatter, CanImplementRefusesWhatItCannotRun) {
  iris::Context& ctx = context();
  const int world = ctx.world_size();
  using Op = iris::ops::GemmReduceScatter;
  const LocalMemory local;
  // Every tensor in local memory: c is not symmetric.
  auto args = local_gemm_arguments<iris::ops::GemmReduceScatterArguments>(128 * world, local);
  EXPECT_TRUE(refuses(Op::can_implement(ctx, args), "symmetric"));
  auto c = ctx.zeros<__nv_bfloat16>(iris::Shape(std::size_t(128) * 256));
  args.c = c.data();
  EXPECT_TRUE(accepts(Op::can_implement(ctx, args)));
  args.m = 128 * world + 1;  // rows do not split evenly
  EXPECT_TRUE(refuses(Op::can_implement(ctx, args), "must be a multiple of the team size"));
  args.m = 64 * world;  // row blocks of half a tile: fused refuses, auto takes bulk-synchronous
  args.pattern = ReduceScatterPattern::kFusedSequential;
  EXPECT_TRUE(refuses(Op::can_implement(ctx, args), "multiple of 128"));
  args.pattern = ReduceScatterPattern::kAuto;
  EXPECT_TRUE(accepts(Op::can_implement(ctx, args)));
  args.pattern = ReduceScatterPattern::kBulkSynchronous;
  EXPECT_TRUE(accepts(Op::can_implement(ctx, args)));
  // The pulling patterns sum only their rows of a tile; they refuse what the others refuse.
  for (auto pattern :
       {ReduceScatterPattern::kProducerConsumer, ReduceScatterPattern::kWorkgroupSpecialized}) {
    SCOPED_TRACE(std::string(iris::ops::to_string(pattern)));
    args.pattern = pattern;
    args.m = 64 * world;
    EXPECT_TRUE(accepts(Op::can_implement(ctx, args)));
    args.m = 128 * world + 1;
    EXPECT_TRUE(refuses(Op::can_implement(ctx, args), "must be a multiple of the team size"));
    args.m = 128 * world;
    expect_row_parallel_refusals<Op>(ctx, args);
  }
  args.pattern = ReduceScatterPattern::kBulkSynchronous;
  args.m = 128 * world;
  args.k = 60;
  EXPECT_TRUE(refuses(Op::can_implement(ctx, args), "K = 60"));
  args.k = 64;
  args.m = (1 << 20) * world;  // C (and the heap) too small for these rows
  EXPECT_TRUE(refuses(Op::can_implement(ctx, args), "inside the symmetric heap"));
  args.m = 128 * world;
  args.team = iris::team{ctx.rank() == 0 ? 1 : 0, 1, 1};  // a team without this rank
  EXPECT_TRUE(refuses(Op::can_implement(ctx, args), "not a member"));
  args.team = iris::team{0, 0, 1};  // size 0: the world
  args.reduce_blocks = -1;
  EXPECT_TRUE(refuses(Op::can_implement(ctx, args), "reduce_blocks"));
  args.reduce_blocks = 0;
  Op op(ctx);
  args.k = 60;
  EXPECT_THROW(op.initialize(args), iris::Error);
  EXPECT_THROW(op.run(), iris::Error);  // never initialized
  ctx.barrier();
}

}  // namespace
