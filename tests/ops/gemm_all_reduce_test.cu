// GEMM + all-reduce in every pattern, on every rank: each rank multiplies its K shard, and every
// element of every rank's C (all of the sum) is checked against a host reference (small-integer
// data, so that every partial and every sum is exact in bf16). Runs follow each other on the
// stream with the operands refreshed before each (another seed each run, one rank late each
// time), so a run must add this run's partials of every member and no member may overwrite a
// slot or partial another still reads; runs are replayed from a CUDA graph into a cleared C; the
// one-shot arrival flags and the per-tile flags of producer-consumer and workgroup-specialized
// must count exactly the runs. On data whose sums round, the five patterns must agree bit for
// bit, on every member and on repeated runs.
#include <cuda_bf16.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "iris/iris.hpp"
#include "iris/ops/gemm_all_reduce.hpp"
#include "iris/ops/trace.hpp"
#include "ops/common.cuh"

namespace {

using iris::ops::AllReducePattern;
using namespace ops_test;

/// All of C = sum over the team's members q of A_q * B_q^T (K: per rank).
std::vector<float> reference(const Problem& p, const iris::team& team, int seed) {
  std::vector<float> c(std::size_t(p.m) * p.n, 0.0f);
  for (int q = 0; q < team.size; ++q) {
    const int rank = team.world_rank(q);
    for (int i = 0; i < p.m; ++i)
      for (int j = 0; j < p.n; ++j) {
        int sum = 0;
        for (int k = 0; k < p.k; ++k) sum += a_value(rank, i, k, seed) * b_value(rank, j, k, seed);
        c[std::size_t(i) * p.n + j] += static_cast<float>(sum);
      }
  }
  return c;
}

std::uint64_t hash_of(const std::vector<__nv_bfloat16>& x) {
  return hash_bytes(x.data(), x.size() * sizeof(__nv_bfloat16));
}

iris::ops::GemmAllReduceArguments arguments(const Problem& p, const Operands& x, void* c,
                                            AllReducePattern pattern, iris::team team = {0, 0, 1}) {
  return gemm_arguments<iris::ops::GemmAllReduceArguments>(p, x.a, x.b, c, pattern, team);
}

void run_pattern(AllReducePattern pattern, const Problem& p, iris::team team = {0, 0, 1},
                 int reduce_blocks = 0) {
  iris::Context& ctx = context();
  if (team.size == 0) team = iris::team::world(ctx.world_size());
  SCOPED_TRACE(std::string(iris::ops::to_string(pattern)) + ", M = " + std::to_string(p.m) +
               ", N = " + std::to_string(p.n) + ", K per rank = " + std::to_string(p.k) +
               ", team of " + std::to_string(team.size) + " from " + std::to_string(team.start) +
               ", reduce_blocks " + std::to_string(reduce_blocks));
  const Operands x(p, ctx.rank(), false);
  const std::size_t count = std::size_t(p.m) * p.n;
  auto c = ctx.zeros<__nv_bfloat16>(iris::Shape(count));

  iris::ops::GemmAllReduce op(ctx);
  auto args = arguments(p, x, c.data(), pattern, team);
  args.reduce_blocks = reduce_blocks;
  ASSERT_NO_FATAL_FAILURE(initialize_checked(ctx, op, args));
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);

  // Back-to-back runs, each on fresh operands, one member late each time; each run's C is kept
  // (copied on the stream) and checked at the end.
  constexpr int kRuns = 3, kReplays = 3;
  {
    const RunCopies<__nv_bfloat16> kept(count, kRuns);
    for (int r = 0; r < kRuns; ++r) {
      if (team.index_of(ctx.rank()) == r % team.size) delay<<<1, 1, 0, stream>>>(2'000'000);
      x.refill(r, false, stream);
      op.run(stream);
      ASSERT_EQ(kept.keep(r, c.data(), stream), cudaSuccess);
    }
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    ctx.check_device_errors();
    for (int r = 0; r < kRuns; ++r) {
      const auto got = kept.to_host(r);
      expect_c(ctx, got, reference(p, team, r), "run " + std::to_string(r));
      expect_same_as_team(ctx, team, hash_of(got), "run " + std::to_string(r), "C");
    }
  }

  // Clear C everywhere, then only graph replays fill it again (operands of the last run).
  ASSERT_NO_FATAL_FAILURE(clear_everywhere(ctx, c.data(), c.bytes()));
  ASSERT_NO_FATAL_FAILURE(replay_graph(ctx, stream, kReplays, [&](cudaStream_t s) { op.run(s); }));
  expect_c(ctx, c.to_host(), reference(p, team, kRuns - 1), "after graph replays");

  if (op.pattern() == AllReducePattern::kOneShot) {
    // Every member stored each tile of C here once per run.
    EXPECT_EQ(op.tiles(),
              ((p.m + op.tile_m() - 1) / op.tile_m()) * ((p.n + op.tile_n() - 1) / op.tile_n()));
    expect_flags(op.tile_flags(), std::size_t(team.size) * op.tiles(), kRuns + kReplays);
  } else if (op.pattern() == AllReducePattern::kProducerConsumer ||
             op.pattern() == AllReducePattern::kWorkgroupSpecialized) {
    // This rank's GEMM stored each tile of its partial product once per run.
    EXPECT_EQ(op.tiles(),
              ((p.m + op.tile_m() - 1) / op.tile_m()) * ((p.n + op.tile_n() - 1) / op.tile_n()));
    expect_flags(op.tile_flags(), std::size_t(op.tiles()), kRuns + kReplays);
  } else if (op.pattern() == AllReducePattern::kTwoShot) {
    // Every member sent each tile of this rank's rows once per run.
    EXPECT_EQ(op.tiles(),
              (p.m / team.size / op.tile_m()) * ((p.n + op.tile_n() - 1) / op.tile_n()));
    expect_flags(op.tile_flags(), std::size_t(team.size) * op.tiles(), kRuns + kReplays);
  } else {
    EXPECT_EQ(op.tile_flags(), nullptr);
  }

  ctx.barrier();
  cudaStreamDestroy(stream);
}

// Two-shot needs M / world to be whole 128-row tiles; N ragged (264 = 256 + 8).
Problem aligned(int world) {
  return {128 * world, 264, exact_k(world)};
}
Problem larger(int world) {
  return {256 * world, 768, exact_k(world)};
}
// Ragged M and N: tiles cut in both directions (one-shot and bulk take any M).
Problem ragged(int) {
  return {300, 136, 32};  // 32 * 8 ranks = 256
}

TEST(GemmAllReduce, BulkSynchronous) {
  const int world = context().world_size();
  run_pattern(AllReducePattern::kBulkSynchronous, ragged(world));
  run_pattern(AllReducePattern::kBulkSynchronous, aligned(world));
}

TEST(GemmAllReduce, OneShot) {
  const int world = context().world_size();
  run_pattern(AllReducePattern::kOneShot, ragged(world));
  run_pattern(AllReducePattern::kOneShot, aligned(world));
  run_pattern(AllReducePattern::kOneShot, larger(world));
}

// One-shot pull, beside the GEMM or in its launch: any M; one reducer block (one cluster of two,
// workgroup-specialized) takes every tile in turn.
void run_pulling(AllReducePattern pattern) {
  const int world = context().world_size();
  run_pattern(pattern, ragged(world));
  run_pattern(pattern, aligned(world));
  run_pattern(pattern, larger(world));
  run_pattern(pattern, ragged(world), {0, 0, 1}, 1);
}

TEST(GemmAllReduce, ProducerConsumer) {
  run_pulling(AllReducePattern::kProducerConsumer);
}

// And reducer blocks asked past the launch's budget: cut to the budget less one cluster, the
// GEMM keeps one cluster (a grid that could not be resident at once could deadlock).
TEST(GemmAllReduce, WorkgroupSpecialized) {
  run_pulling(AllReducePattern::kWorkgroupSpecialized);
  run_pattern(AllReducePattern::kWorkgroupSpecialized, ragged(context().world_size()), {0, 0, 1},
              100000);
}

TEST(GemmAllReduce, TwoShot) {
  const int world = context().world_size();
  run_pattern(AllReducePattern::kTwoShot, aligned(world));
  run_pattern(AllReducePattern::kTwoShot, larger(world));
}

// Two teams at once, each half of the world (from 4 ranks): sums over the team only.
TEST(GemmAllReduce, HalvesOfTheWorld) {
  iris::Context& ctx = context();
  const int world = ctx.world_size();
  if (world < 4) GTEST_SKIP() << "needs at least 4 ranks";
  const iris::team team = half_of_the_world(ctx);
  const int half = team.size;
  const Problem p{128 * half, 264, 256 / half - 24};
  run_pattern(AllReducePattern::kOneShot, p, team);
  run_pattern(AllReducePattern::kTwoShot, p, team);
  run_pattern(AllReducePattern::kBulkSynchronous, p, team);
  run_pattern(AllReducePattern::kProducerConsumer, p, team);
  run_pattern(AllReducePattern::kWorkgroupSpecialized, p, team);
}

TEST(GemmAllReduce, AutoFollowsItsRule) {
  iris::Context& ctx = context();
  const int world = ctx.world_size();
  using Op = iris::ops::GemmAllReduce;
  iris::ops::GemmAllReduceArguments args;
  args.n = 512;
  args.k = 64;
  int devices = 1;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  if (ctx.local_world_size() > devices) {
    // Ranks share a GPU: bulk-synchronous at every size (what was measured).
    for (const int m : {128 * world, 4096, 4096 + world}) {
      args.m = m;
      EXPECT_EQ(Op::choose(ctx, args), AllReducePattern::kBulkSynchronous) << "M " << m;
    }
  } else {
    args.m = 128 * world;  // world x M x N x 2 bytes <= 8 MiB: one-shot
    EXPECT_EQ(Op::choose(ctx, args), AllReducePattern::kOneShot);
    args.n = 4096;
    args.m = 4096;  // 32 MiB of product per member, W x that in one-shot slots
    EXPECT_EQ(Op::choose(ctx, args),
              world <= 2 ? AllReducePattern::kOneShot : AllReducePattern::kTwoShot);
    args.m = 4096 + world;  // row blocks of no whole tiles
    EXPECT_EQ(Op::choose(ctx, args),
              world <= 2 ? AllReducePattern::kOneShot : AllReducePattern::kBulkSynchronous);
  }
  args.pattern = AllReducePattern::kOneShot;  // what is asked is taken
  EXPECT_EQ(Op::choose(ctx, args), AllReducePattern::kOneShot);
  run_pattern(AllReducePattern::kAuto, aligned(world));
}

// Rounding data: every pattern rounds each partial to bf16 once and adds the members in fp32 in
// team order, so all five agree bit for bit, on every member and run after run.
TEST(GemmAllReduce, PatternsAgreeWhereSumsRound) {
  iris::Context& ctx = context();
  const int world = ctx.world_size();
  const iris::team team = iris::team::world(world);
  const Problem p{128 * world, 512, 1024};
  const Operands x(p, ctx.rank(), true);
  const std::size_t count = std::size_t(p.m) * p.n;
  std::vector<std::vector<__nv_bfloat16>> results;
  for (auto pattern :
       {AllReducePattern::kOneShot, AllReducePattern::kTwoShot, AllReducePattern::kBulkSynchronous,
        AllReducePattern::kProducerConsumer, AllReducePattern::kWorkgroupSpecialized}) {
    auto c = ctx.zeros<__nv_bfloat16>(iris::Shape(count));
    iris::ops::GemmAllReduce op(ctx);
    op.initialize(arguments(p, x, c.data(), pattern));
    op.run();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ctx.check_device_errors();
    results.push_back(c.to_host());
    for (int r = 0; r < 2; ++r) op.run();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto again = c.to_host();
    EXPECT_EQ(std::memcmp(results.back().data(), again.data(), count * sizeof(__nv_bfloat16)), 0)
        << "rank " << ctx.rank() << ": repeated " << iris::ops::to_string(pattern)
        << " runs differ";
    expect_same_as_team(ctx, team, hash_of(again), std::string(iris::ops::to_string(pattern)), "C");
    ctx.barrier();
  }
  std::size_t nonzero = 0;
  for (const auto& v : results[0]) nonzero += __bfloat162float(v) != 0.0f;
  EXPECT_GT(nonzero, count / 2) << "the data should give mostly non-zero sums";
  for (std::size_t r = 1; r < results.size(); ++r)
    EXPECT_EQ(std::memcmp(results[0].data(), results[r].data(), count * sizeof(__nv_bfloat16)), 0)
        << "rank " << ctx.rank() << ": pattern " << r << " differs from one-shot";
}

// Tracing a pattern's tile-store GEMM: every tile of C has its gemm_tile, store and signal
// events per run (producer-consumer and workgroup-specialized store them here only).
void expect_traced(AllReducePattern pattern, const Problem& p) {
  iris::Context& ctx = context();
  const int world = ctx.world_size();
  SCOPED_TRACE(std::string(iris::ops::to_string(pattern)) + ", M = " + std::to_string(p.m));
  const Operands x(p, ctx.rank(), false);
  auto c = ctx.zeros<__nv_bfloat16>(iris::Shape(std::size_t(p.m) * p.n));
  iris::ops::Tracer tracer;
  auto args = arguments(p, x, c.data(), pattern);
  args.trace = &tracer;
  iris::ops::GemmAllReduce op(ctx);
  op.initialize(args);
  constexpr int kRuns = 2;
  for (int r = 0; r < kRuns; ++r) op.run();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  expect_c(ctx, c.to_host(), reference(p, iris::team::world(world), 0), "traced");
  expect_tile_events(tracer, op.tiles(), kRuns);
  ctx.barrier();
}

TEST(GemmAllReduce, TraceOfOneShot) {
  expect_traced(AllReducePattern::kOneShot, aligned(context().world_size()));
}

TEST(GemmAllReduce, TraceOfProducerConsumer) {
  expect_traced(AllReducePattern::kProducerConsumer, ragged(context().world_size()));
}

TEST(GemmAllReduce, TraceOfWorkgroupSpecialized) {
  expect_traced(AllReducePattern::kWorkgroupSpecialized, ragged(context().world_size()));
}

TEST(GemmAllReduce, CanImplementRefusesWhatItCannotRun) {
  iris::Context& ctx = context();
  const int world = ctx.world_size();
  using Op = iris::ops::GemmAllReduce;
  const LocalMemory local;
  // Every tensor in local memory: c is not symmetric.
  auto args = local_gemm_arguments<iris::ops::GemmAllReduceArguments>(128 * world, local);
  EXPECT_TRUE(refuses(Op::can_implement(ctx, args), "symmetric"));
  auto c = ctx.zeros<__nv_bfloat16>(iris::Shape(std::size_t(128) * world * 256));
  args.c = c.data();
  EXPECT_TRUE(accepts(Op::can_implement(ctx, args)));
  args.pattern = AllReducePattern::kTwoShot;
  EXPECT_TRUE(accepts(Op::can_implement(ctx, args)));
  args.m = 64 * world;  // row blocks of half a tile: two-shot refuses, the others take it
  EXPECT_TRUE(refuses(Op::can_implement(ctx, args), "multiple of 128"));
  args.m = 128 * world + 1;  // rows do not split at all
  EXPECT_TRUE(refuses(Op::can_implement(ctx, args), "two-shot"));
  for (auto pattern :
       {AllReducePattern::kOneShot, AllReducePattern::kBulkSynchronous,
        AllReducePattern::kProducerConsumer, AllReducePattern::kWorkgroupSpecialized}) {
    args.pattern = pattern;
    EXPECT_TRUE(accepts(Op::can_implement(ctx, args)));
  }
  args.m = 128 * world;
  args.k = 60;
  EXPECT_TRUE(refuses(Op::can_implement(ctx, args), "K = 60"));
  args.k = 64;
  args.n = 250;  // rows of C of 500 bytes
  EXPECT_FALSE(Op::can_implement(ctx, args));
  args.n = 256;
  args.m = (1 << 20) * world;  // C too small for these rows
  EXPECT_TRUE(refuses(Op::can_implement(ctx, args), "inside the symmetric heap"));
  args.m = 128 * world;
  args.team = iris::team{ctx.rank() == 0 ? 1 : 0, 1, 1};  // a team without this rank
  EXPECT_TRUE(refuses(Op::can_implement(ctx, args), "not a member"));
  args.team = iris::team{0, world + 1, 1};
  EXPECT_TRUE(refuses(Op::can_implement(ctx, args), "does not fit"));
  args.team = iris::team{0, 0, 1};  // size 0: the world
  args.reduce_blocks = -1;
  EXPECT_TRUE(refuses(Op::can_implement(ctx, args), "reduce_blocks"));
  args.reduce_blocks = 0;
  // The pulling patterns refuse what the others refuse.
  for (auto pattern :
       {AllReducePattern::kProducerConsumer, AllReducePattern::kWorkgroupSpecialized}) {
    SCOPED_TRACE(std::string(iris::ops::to_string(pattern)));
    args.pattern = pattern;
    expect_row_parallel_refusals<Op>(ctx, args);
  }
  Op op(ctx);
  args.k = 60;
  EXPECT_THROW(op.initialize(args), iris::Error);
  EXPECT_THROW(op.run(), iris::Error);  // never initialized
  ctx.barrier();
}

}  // namespace
