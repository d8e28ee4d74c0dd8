// all-gather + GEMM in every pattern, on every rank: each member holds a row shard of A (in the
// heap) and its own weights B; every element of every rank's C = A_full * B^T is checked
// against a host reference (small-integer data, so that every dot product is exact in bf16).
// Runs follow each other on the stream with the shard refreshed before each (another seed each
// run, one member late each time), so a run must multiply this run's shard of every member, and
// no member may overwrite its shard while a peer still pulls it; runs are replayed from a CUDA
// graph into a cleared C. On data whose dot products round, both patterns agree bit for bit.
#include <cuda_bf16.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "iris/iris.hpp"
#include "iris/ops/all_gather_gemm.hpp"
#include "mp/common.cuh"

namespace {

using iris::ops::AllGatherPattern;
using iris_test::context;

// Values in {-1, 0, 1}: with K <= 256 every dot product is an integer of magnitude <= 256,
// which bf16 represents exactly. Rows of A are numbered in A_full, so a shard landing at the
// wrong rows is wrong; B differs from rank to rank (each member's own weights).
__host__ __device__ int a_value(int row, int k, int seed) {
  return (row * 7 + k * 3 + seed * 2) % 3 - 1;
}
__host__ __device__ int b_value(int rank, int j, int k) {
  return (j * 5 + k + rank * 11) % 3 - 1;
}
__host__ __device__ float a_rounding(int row, int k) {
  return static_cast<float>((row * 13 + k * 7) % 17 - 8) / 8.0f;
}
__host__ __device__ float b_rounding(int rank, int j, int k) {
  return static_cast<float>((j * 11 + k * 5 + rank * 7) % 15 - 7) / 8.0f;
}

/// This member's shard: rows [row0, row0 + rows) of A_full.
__global__ void fill_shard(__nv_bfloat16* a, int row0, int rows, int k, int seed, bool rounding) {
  for (int x = blockIdx.x * blockDim.x + threadIdx.x; x < rows * k; x += gridDim.x * blockDim.x)
    a[x] = rounding ? __float2bfloat16_rn(a_rounding(row0 + x / k, x % k))
                    : __int2bfloat16_rn(a_value(row0 + x / k, x % k, seed));
}
__global__ void fill_weights(__nv_bfloat16* b, int n, int k, int rank, bool rounding) {
  for (int x = blockIdx.x * blockDim.x + threadIdx.x; x < n * k; x += gridDim.x * blockDim.x)
    b[x] = rounding ? __float2bfloat16_rn(b_rounding(rank, x / k, x % k))
                    : __int2bfloat16_rn(b_value(rank, x / k, x % k));
}

/// Spins for about `ns` nanoseconds: makes one rank late.
__global__ void delay(unsigned ns) {
  const long long start = clock64();
  while (clock64() - start < static_cast<long long>(ns) * 2) {
  }
}

struct Problem {
  int m, n, k;  // m: all members' rows together
};

/// C = A_full * B^T with this rank's B.
std::vector<float> reference(const Problem& p, int rank, int seed) {
  std::vector<float> c(std::size_t(p.m) * p.n, 0.0f);
  for (int i = 0; i < p.m; ++i)
    for (int j = 0; j < p.n; ++j) {
      int sum = 0;
      for (int k = 0; k < p.k; ++k) sum += a_value(i, k, seed) * b_value(rank, j, k);
      c[std::size_t(i) * p.n + j] = static_cast<float>(sum);
    }
  return c;
}

void expect_c(iris::Context& ctx, const std::vector<__nv_bfloat16>& got,
              const std::vector<float>& want, const std::string& when) {
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
  iris::Buffer<__nv_bfloat16> shard;  // symmetric
  __nv_bfloat16* b = nullptr;
  __nv_bfloat16* c = nullptr;
  Problem p;
  int rows, row0;
  Operands(iris::Context& ctx, const Problem& problem, const iris::team& team, bool rounding)
      : p(problem), rows(problem.m / team.size), row0(team.index_of(ctx.rank()) * rows) {
    shard = ctx.zeros<__nv_bfloat16>(iris::Shape(std::size_t(rows) * p.k));
    EXPECT_EQ(cudaMalloc(&b, sizeof(__nv_bfloat16) * p.n * p.k), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&c, sizeof(__nv_bfloat16) * p.m * p.n), cudaSuccess);
    fill_weights<<<128, 256>>>(b, p.n, p.k, ctx.rank(), rounding);
    refill(0, rounding, nullptr);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ctx.barrier();
  }
  void refill(int seed, bool rounding, cudaStream_t stream) {
    fill_shard<<<128, 256, 0, stream>>>(shard.data(), row0, rows, p.k, seed, rounding);
  }
  std::vector<__nv_bfloat16> c_host() const {
    std::vector<__nv_bfloat16> out(std::size_t(p.m) * p.n);
    EXPECT_EQ(cudaMemcpy(out.data(), c, out.size() * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return out;
  }
  ~Operands() {
    cudaFree(b);
    cudaFree(c);
  }
};

iris::ops::AllGatherGemmArguments arguments(const Problem& p, const Operands& x,
                                            AllGatherPattern pattern, iris::team team) {
  iris::ops::AllGatherGemmArguments args;
  args.m = p.m;
  args.n = p.n;
  args.k = p.k;
  args.a = x.shard.data();
  args.b = x.b;
  args.c = x.c;
  args.pattern = pattern;
  args.team = team;
  return args;
}

void run_pattern(AllGatherPattern pattern, const Problem& p, iris::team team = {0, 0, 1}) {
  iris::Context& ctx = context();
  if (team.size == 0) team = iris::team::world(ctx.world_size());
  SCOPED_TRACE(std::string(iris::ops::to_string(pattern)) + ", M = " + std::to_string(p.m) +
               ", N = " + std::to_string(p.n) + ", K = " + std::to_string(p.k) + ", team of " +
               std::to_string(team.size) + " from " + std::to_string(team.start));
  Operands x(ctx, p, team, false);
  const std::size_t count = std::size_t(p.m) * p.n;

  const auto args = arguments(p, x, pattern, team);
  const auto status = iris::ops::AllGatherGemm::can_implement(ctx, args);
  ASSERT_TRUE(status) << status.message;
  iris::ops::AllGatherGemm op(ctx);
  op.initialize(args);
  EXPECT_NE(op.pattern(), AllGatherPattern::kAuto);
  if (pattern != AllGatherPattern::kAuto) EXPECT_EQ(op.pattern(), pattern);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);

  // Back-to-back runs, each on a fresh shard, one member late each time; each run's C is kept
  // (copied on the stream) and checked at the end.
  constexpr int kRuns = 3, kReplays = 3;
  __nv_bfloat16* kept = nullptr;
  ASSERT_EQ(cudaMalloc(&kept, sizeof(__nv_bfloat16) * count * kRuns), cudaSuccess);
  for (int r = 0; r < kRuns; ++r) {
    if (team.index_of(ctx.rank()) == r % team.size) delay<<<1, 1, 0, stream>>>(2'000'000);
    x.refill(r, false, stream);
    op.run(stream);
    ASSERT_EQ(cudaMemcpyAsync(kept + r * count, x.c, sizeof(__nv_bfloat16) * count,
                              cudaMemcpyDeviceToDevice, stream),
              cudaSuccess);
  }
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ctx.check_device_errors();
  std::vector<__nv_bfloat16> got(count);
  for (int r = 0; r < kRuns; ++r) {
    ASSERT_EQ(cudaMemcpy(got.data(), kept + r * count, sizeof(__nv_bfloat16) * count,
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    expect_c(ctx, got, reference(p, ctx.rank(), r), "run " + std::to_string(r));
  }
  cudaFree(kept);

  // Clear C, then only graph replays fill it again (the last run's shards). The graph holds
  // the refill too: replays keep overwriting the shard that peers pull.
  ctx.barrier();
  ASSERT_EQ(cudaMemset(x.c, 0, sizeof(__nv_bfloat16) * count), cudaSuccess);
  ctx.barrier();
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  x.refill(kRuns - 1, false, stream);
  op.run(stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int r = 0; r < kReplays; ++r) ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ctx.check_device_errors();
  expect_c(ctx, x.c_host(), reference(p, ctx.rank(), kRuns - 1), "after graph replays");

  ctx.barrier();
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
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

// Two teams at once, each half of the world (from 4 ranks): each gathers its own members only.
TEST(AllGatherGemm, HalvesOfTheWorld) {
  iris::Context& ctx = context();
  const int world = ctx.world_size();
  if (world < 4) GTEST_SKIP() << "needs at least 4 ranks";
  const int half = world / 2;
  const iris::team team{ctx.rank() < half ? 0 : half, half, 1};
  const Problem p{256 * half, 264, 64};
  run_pattern(AllGatherPattern::kProducerConsumer, p, team);
  run_pattern(AllGatherPattern::kBulkSynchronous, p, team);
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
  run_pattern(AllGatherPattern::kAuto, aligned(world));
}

// Rounding data: each element is one GEMM's dot product over all of K in both patterns.
TEST(AllGatherGemm, PatternsAgreeWhereDotsRound) {
  iris::Context& ctx = context();
  const int world = ctx.world_size();
  const iris::team team = iris::team::world(world);
  const Problem p{256 * world, 512, 1024};
  Operands x(ctx, p, team, true);
  std::vector<std::vector<__nv_bfloat16>> results;
  for (auto pattern : {AllGatherPattern::kProducerConsumer, AllGatherPattern::kBulkSynchronous}) {
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
}

TEST(AllGatherGemm, CanImplementRefusesWhatItCannotRun) {
  iris::Context& ctx = context();
  const int world = ctx.world_size();
  using Op = iris::ops::AllGatherGemm;
  iris::ops::AllGatherGemmArguments args;
  args.m = 128 * world;
  args.n = 256;
  args.k = 64;
  void* local = nullptr;
  ASSERT_EQ(cudaMalloc(&local, 1 << 20), cudaSuccess);
  args.a = local;  // not symmetric
  args.b = args.c = local;
  EXPECT_THAT(Op::can_implement(ctx, args).message, testing::HasSubstr("symmetric"));
  auto shard = ctx.zeros<__nv_bfloat16>(iris::Shape(std::size_t(128) * 64));
  args.a = shard.data();
  EXPECT_TRUE(Op::can_implement(ctx, args)) << Op::can_implement(ctx, args).message;
  args.m = 128 * world + 1;  // rows do not split evenly
  EXPECT_THAT(Op::can_implement(ctx, args).message,
              testing::HasSubstr("multiple of the team size"));
  args.m = 0;
  EXPECT_THAT(Op::can_implement(ctx, args).message, testing::HasSubstr("positive multiple"));
  args.m = 128 * world;
  args.k = 60;
  EXPECT_THAT(Op::can_implement(ctx, args).message, testing::HasSubstr("K = 60"));
  args.k = 64;
  args.n = 250;  // rows of C of 500 bytes
  EXPECT_FALSE(Op::can_implement(ctx, args));
  args.n = 256;
  // Rows of this shard that would run past the end of the heap (a pointer inside the heap with
  // rows beyond it is all can_implement can see: it does not know the buffer's size).
  const std::size_t rows_past_heap = ctx.heap().size / (std::size_t(64) * 2) + 1;
  args.m = static_cast<int>(rows_past_heap) * world;
  EXPECT_THAT(Op::can_implement(ctx, args).message,
              testing::HasSubstr("inside the symmetric heap"));
  args.m = 128 * world;
  args.team = iris::team{ctx.rank() == 0 ? 1 : 0, 1, 1};  // a team without this rank
  EXPECT_THAT(Op::can_implement(ctx, args).message, testing::HasSubstr("not a member"));
  args.team = iris::team{0, world + 1, 1};
  EXPECT_THAT(Op::can_implement(ctx, args).message, testing::HasSubstr("does not fit"));
  args.team = iris::team{0, 0, 1};
  Op op(ctx);
  args.k = 60;
  EXPECT_THROW(op.initialize(args), iris::Error);
  EXPECT_THROW(op.run(), iris::Error);  // never initialized
  cudaFree(local);
  ctx.barrier();
}

}  // namespace
