// all-gather + GEMM in every pattern, on every rank: each member holds a row shard of A (in the
// heap) and its own weights B; every element of every rank's C = A_full * B^T is checked
// against a host reference (small-integer data, so that every dot product is exact in bf16).
// Runs follow each other on the stream with the shard refreshed before each (another seed each
// run, one member late each time), so a run must multiply this run's shard of every member, and
// no member may overwrite its shard while a peer still pulls it; runs are replayed from a CUDA
// graph into a cleared C (the fused-mainloop pattern 20 times: its shard flags count runs, and
// replays must count too). On data whose dot products round, every pattern agrees bit for bit.
#include <cuda_bf16.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "iris/iris.hpp"
#include "iris/ops/all_gather_gemm.hpp"
#include "ops/common.cuh"

namespace {

using iris::ops::AllGatherPattern;
using namespace ops_test;

// A_full is the same on every rank (the data of "rank" 0, its rows numbered in A_full, so a
// shard landing at the wrong rows is wrong); B differs from rank to rank (each member's own
// weights) and keeps seed 0. With K <= 256 every dot product is exact in bf16.

/// C = A_full * B^T with this rank's B (M: all members' rows together).
std::vector<float> reference(const Problem& p, int rank, int seed) {
  std::vector<float> c(std::size_t(p.m) * p.n, 0.0f);
  for (int i = 0; i < p.m; ++i)
    for (int j = 0; j < p.n; ++j) {
      int sum = 0;
      for (int k = 0; k < p.k; ++k) sum += a_value(0, i, k, seed) * b_value(rank, j, k);
      c[std::size_t(i) * p.n + j] = static_cast<float>(sum);
    }
  return c;
}

struct ShardOperands {
  iris::Buffer<__nv_bfloat16> shard;  // symmetric
  __nv_bfloat16* b = nullptr;
  __nv_bfloat16* c = nullptr;
  Problem p;
  int rows, row0;
  ShardOperands(iris::Context& ctx, const Problem& problem, const iris::team& team, bool rounding)
      : p(problem), rows(problem.m / team.size), row0(team.index_of(ctx.rank()) * rows) {
    shard = ctx.zeros<__nv_bfloat16>(iris::Shape(std::size_t(rows) * p.k));
    EXPECT_EQ(cudaMalloc(&b, sizeof(__nv_bfloat16) * p.n * p.k), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&c, sizeof(__nv_bfloat16) * p.m * p.n), cudaSuccess);
    fill_b<<<128, 256>>>(b, ctx.rank(), p.n, p.k, 0, rounding);
    refill(0, rounding, nullptr);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ctx.barrier();
  }
  void refill(int seed, bool rounding, cudaStream_t stream) {
    fill_a<<<128, 256, 0, stream>>>(shard.data(), 0, row0, rows, p.k, seed, rounding);
  }
  std::vector<__nv_bfloat16> c_host() const {
    std::vector<__nv_bfloat16> out(std::size_t(p.m) * p.n);
    EXPECT_EQ(cudaMemcpy(out.data(), c, out.size() * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return out;
  }
  ~ShardOperands() {
    cudaFree(b);
    cudaFree(c);
  }
};

iris::ops::AllGatherGemmArguments arguments(const Problem& p, const ShardOperands& x,
                                            AllGatherPattern pattern, iris::team team) {
  return gemm_arguments<iris::ops::AllGatherGemmArguments>(p, x.shard.data(), x.b, x.c, pattern,
                                                           team);
}

void run_pattern(AllGatherPattern pattern, const Problem& p, iris::team team = {0, 0, 1},
                 int replays = 3) {
  iris::Context& ctx = context();
  if (team.size == 0) team = iris::team::world(ctx.world_size());
  SCOPED_TRACE(std::string(iris::ops::to_string(pattern)) + ", M = " + std::to_string(p.m) +
               ", N = " + std::to_string(p.n) + ", K = " + std::to_string(p.k) + ", team of " +
               std::to_string(team.size) + " from " + std::to_string(team.start));
  ShardOperands x(ctx, p, team, false);
  const std::size_t count = std::size_t(p.m) * p.n;

  iris::ops::AllGatherGemm op(ctx);
  ASSERT_NO_FATAL_FAILURE(initialize_checked(ctx, op, arguments(p, x, pattern, team)));
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);

  // Back-to-back runs, each on a fresh shard, one member late each time; each run's C is kept
  // (copied on the stream) and checked at the end.
  constexpr int kRuns = 3;
  {
    const RunCopies<__nv_bfloat16> kept(count, kRuns);
    for (int r = 0; r < kRuns; ++r) {
      if (team.index_of(ctx.rank()) == r % team.size) delay<<<1, 1, 0, stream>>>(2'000'000);
      x.refill(r, false, stream);
      op.run(stream);
      ASSERT_EQ(kept.keep(r, x.c, stream), cudaSuccess);
    }
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    ctx.check_device_errors();
    for (int r = 0; r < kRuns; ++r)
      expect_c(ctx, kept.to_host(r), reference(p, ctx.rank(), r), "run " + std::to_string(r));
  }

  // Clear C, then only graph replays fill it again (the last run's shards). The graph holds
  // the refill too: replays keep overwriting the shard that peers pull.
  ASSERT_NO_FATAL_FAILURE(clear_everywhere(ctx, x.c, sizeof(__nv_bfloat16) * count));
  ASSERT_NO_FATAL_FAILURE(replay_graph(ctx, stream, replays, [&](cudaStream_t s) {
    x.refill(kRuns - 1, false, s);
    op.run(s);
  }));
  expect_c(ctx, x.c_host(), reference(p, ctx.rank(), kRuns - 1), "after graph replays");

  ctx.barrier();
  cudaStreamDestroy(stream);
}

// Exact data: |dot| <= K <= 256.
Problem aligned(int world) {
  return {256 * world, 264, 200};
}
// Shards of 75, 150 or 300 rows (ragged tiles), N ragged, K not a multiple of the k-tile.
Problem ragged(int) {
  return {600, 136, 72};
}
Problem larger(int world) {
  return {384 * world, 512, 256};  // shards of three tile rows
}

TEST(AllGatherGemm, BulkSynchronous) {
  const int world = context().world_size();
  run_pattern(AllGatherPattern::kBulkSynchronous, ragged(world));
  run_pattern(AllGatherPattern::kBulkSynchronous, aligned(world));
}

TEST(AllGatherGemm, ProducerConsumer) {
  const int world = context().world_size();
  run_pattern(AllGatherPattern::kProducerConsumer, ragged(world));
  run_pattern(AllGatherPattern::kProducerConsumer, aligned(world));
  run_pattern(AllGatherPattern::kProducerConsumer, larger(world));
}

// One GEMM whose mainloop waits per tile for its shards: shards that tiles straddle (75, 150 or
// 300 rows), one tile row per shard, three; 20 graph replays each.
TEST(AllGatherGemm, FusedMainloop) {
  const int world = context().world_size();
  constexpr int kReplays = 20;
  run_pattern(AllGatherPattern::kFusedMainloop, ragged(world), {0, 0, 1}, kReplays);
  run_pattern(AllGatherPattern::kFusedMainloop, aligned(world), {0, 0, 1}, kReplays);
  run_pattern(AllGatherPattern::kFusedMainloop, larger(world), {0, 0, 1}, kReplays);
}

// Two teams at once, each half of the world (from 4 ranks): each gathers its own members only.
TEST(AllGatherGemm, HalvesOfTheWorld) {
  iris::Context& ctx = context();
  const int world = ctx.world_size();
  if (world < 4) GTEST_SKIP() << "needs at least 4 ranks";
  const iris::team team = half_of_the_world(ctx);
  const Problem p{256 * team.size, 264, 64};
  run_pattern(AllGatherPattern::kProducerConsumer, p, team);
  run_pattern(AllGatherPattern::kBulkSynchronous, p, team);
  run_pattern(AllGatherPattern::kFusedMainloop, p, team);
}

TEST(AllGatherGemm, AutoFollowsItsRule) {
  iris::Context& ctx = context();
  const int world = ctx.world_size();
  using Op = iris::ops::AllGatherGemm;
  iris::ops::AllGatherGemmArguments args;
  args.n = 256;
  args.k = 64;
  int devices = 1;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  const bool sharing = ctx.local_world_size() > devices;  // then bulk (what was measured)
  args.m = 128 * world;                                   // shards of one tile row
  EXPECT_EQ(Op::choose(ctx, args),
            sharing ? AllGatherPattern::kBulkSynchronous : AllGatherPattern::kProducerConsumer);
  args.m = 64 * world;
  EXPECT_EQ(Op::choose(ctx, args), AllGatherPattern::kBulkSynchronous);
  args.pattern = AllGatherPattern::kProducerConsumer;  // what is asked is taken
  EXPECT_EQ(Op::choose(ctx, args), AllGatherPattern::kProducerConsumer);
  args.pattern = AllGatherPattern::kFusedMainloop;
  EXPECT_EQ(Op::choose(ctx, args), AllGatherPattern::kFusedMainloop);
  run_pattern(AllGatherPattern::kAuto, aligned(world));
}

// Rounding data: each element is one GEMM's dot product over all of K in every pattern.
TEST(AllGatherGemm, PatternsAgreeWhereDotsRound) {
  iris::Context& ctx = context();
  const int world = ctx.world_size();
  const iris::team team = iris::team::world(world);
  const Problem p{256 * world, 512, 1024};
  ShardOperands x(ctx, p, team, true);
  std::vector<std::vector<__nv_bfloat16>> results;
  for (auto pattern : {AllGatherPattern::kProducerConsumer, AllGatherPattern::kBulkSynchronous,
                       AllGatherPattern::kFusedMainloop}) {
    iris::ops::AllGatherGemm op(ctx);
    op.initialize(arguments(p, x, pattern, team));
    op.run();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ctx.check_device_errors();
    results.push_back(x.c_host());
    ASSERT_EQ(cudaMemset(x.c, 0, sizeof(__nv_bfloat16) * p.m * p.n), cudaSuccess);
    ctx.barrier();
  }
  const std::size_t count = results[0].size();
  std::size_t nonzero = 0;
  for (const auto& v : results[0]) nonzero += __bfloat162float(v) != 0.0f;
  EXPECT_GT(nonzero, count / 2) << "the data should give mostly non-zero products";
  EXPECT_EQ(std::memcmp(results[0].data(), results[1].data(), count * sizeof(__nv_bfloat16)), 0)
      << "rank " << ctx.rank() << ": producer-consumer and bulk-synchronous differ";
  EXPECT_EQ(std::memcmp(results[0].data(), results[2].data(), count * sizeof(__nv_bfloat16)), 0)
      << "rank " << ctx.rank() << ": producer-consumer and fused-mainloop differ";
}

TEST(AllGatherGemm, CanImplementRefusesWhatItCannotRun) {
  iris::Context& ctx = context();
  const int world = ctx.world_size();
  using Op = iris::ops::AllGatherGemm;
  const LocalMemory local;
  // Every tensor in local memory: a is not symmetric.
  auto args = local_gemm_arguments<iris::ops::AllGatherGemmArguments>(128 * world, local);
  EXPECT_TRUE(refuses(Op::can_implement(ctx, args), "symmetric"));
  auto shard = ctx.zeros<__nv_bfloat16>(iris::Shape(std::size_t(128) * 64));
  args.a = shard.data();
  EXPECT_TRUE(accepts(Op::can_implement(ctx, args)));
  args.m = 128 * world + 1;  // rows do not split evenly
  EXPECT_TRUE(refuses(Op::can_implement(ctx, args), "multiple of the team size"));
  args.m = 0;
  EXPECT_TRUE(refuses(Op::can_implement(ctx, args), "positive multiple"));
  args.m = 128 * world;
  args.k = 60;
  EXPECT_TRUE(refuses(Op::can_implement(ctx, args), "K = 60"));
  args.k = 64;
  args.n = 250;  // rows of C of 500 bytes
  EXPECT_FALSE(Op::can_implement(ctx, args));
  args.n = 256;
  // Rows of this shard that would run past the end of the heap (a pointer inside the heap with
  // rows beyond it is all can_implement can see: it does not know the buffer's size).
  const std::size_t rows_past_heap = ctx.heap().size / (std::size_t(64) * 2) + 1;
  args.m = static_cast<int>(rows_past_heap) * world;
  EXPECT_TRUE(refuses(Op::can_implement(ctx, args), "inside the symmetric heap"));
  args.m = 128 * world;
  args.team = iris::team{ctx.rank() == 0 ? 1 : 0, 1, 1};  // a team without this rank
  EXPECT_TRUE(refuses(Op::can_implement(ctx, args), "not a member"));
  args.team = iris::team{0, world + 1, 1};
  EXPECT_TRUE(refuses(Op::can_implement(ctx, args), "does not fit"));
  args.team = iris::team{0, 0, 1};
  Op op(ctx);
  args.k = 60;
  EXPECT_THROW(op.initialize(args), iris::Error);
  EXPECT_THROW(op.run(), iris::Error);  // never initialized
  ctx.barrier();
}

}  // namespace
