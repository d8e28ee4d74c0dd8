// GEMM + all-reduce + residual add + RMSNorm in both patterns, on every rank. The operands are
// small integers ({-1, 0, 1}, K_r * members = 128; residual in [-8, 8]), so every partial
// product, every sum and residual_out are integers below 256 that bf16 and fp16 hold exactly:
// residual_out is compared exactly. y is compared with a double reference: bf16/fp16 y within
// the type's rounding (the op's fp32 norm rounds once), fp8 y within one e4m3 step of the
// reference converted the same way (round to nearest even, saturating), at most 1% adjacent (see
// allreduce_rmsnorm_test.cu for why not exact). Since residual_out is exact, the bulk-synchronous
// and the fused pattern must agree bit for bit, and every member must hold the same bits. Runs
// follow each other with the operands refreshed on the stream before each (another seed, one
// rank late each time); a CUDA graph of one run is replayed into cleared outputs.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "iris/iris.hpp"
#include "iris/ops/gemm_allreduce_rmsnorm.hpp"
#include "ops/common.cuh"

namespace {

using iris::ops::AllReduceNormPattern;
using iris::ops::DType;
using iris::ops::GemmAllReduceRmsNorm;
using iris::ops::GemmAllReduceRmsNormArguments;
using iris::ops::NormOutput;
using ops_test::accepts;
using ops_test::context;
using ops_test::delay;
using ops_test::expect_same_as_team;
using ops_test::fp8_order;
using ops_test::from_float;
using ops_test::hash_results;
using ops_test::refuses;
using ops_test::to_float;
using ops_test::ulp;

constexpr int kTeamK = 128;  // K_r * members: |partial sums| <= 128
constexpr float kEps = 1e-5f;
constexpr float kFp8Scale = 1.f / 200;  // the largest normalized values saturate

// Both depend on k (period 3), so the partial sums vary with i, j, the member and the seed.
__host__ __device__ int a_value(int rank, int i, int k, int seed) {
  return (i * 7 + k * 5 + rank * 3 + seed * 2) % 3 - 1;
}
__host__ __device__ int b_value(int rank, int j, int k, int seed) {
  return (j * 5 + k * 2 + rank * 11 + seed) % 3 - 1;
}
__host__ __device__ int residual_value(int i, int j, int seed) {
  return (i * 3 + j * 7 + seed) % 17 - 8;
}
__host__ __device__ float gamma_value(int j) {
  return 0.5f + static_cast<float>(j % 9) / 8;  // multiples of 1/8 in [0.5, 1.5]
}

template <class T>
__global__ void fill(T* a, T* b, T* residual, T* gamma, int m, int n, int k, int rank, int seed) {
  const long total = static_cast<long>(m > n ? m : n) * (k > n ? k : n);
  for (long x = blockIdx.x * long{blockDim.x} + threadIdx.x; x < total;
       x += long{gridDim.x} * blockDim.x) {
    if (x < long{m} * k) a[x] = from_float<T>(a_value(rank, x / k, x % k, seed));
    if (x < long{n} * k) b[x] = from_float<T>(b_value(rank, x / k, x % k, seed));
    if (x < long{m} * n) residual[x] = from_float<T>(residual_value(x / n, x % n, seed));
    if (x < n) gamma[x] = from_float<T>(gamma_value(x));
  }
}

struct Case {
  int m, n;
  AllReduceNormPattern pattern;
  bool fp8 = false;
  bool in_place = false;
  iris::team team{0, 0, 1};  // size 0: the world
};

/// residual + sum over the team of A_q B_q^T (exact integers).
std::vector<double> reference_out(const Case& c, int k, const iris::team& team, int seed) {
  std::vector<double> out(std::size_t(c.m) * c.n);
  for (int i = 0; i < c.m; ++i)
    for (int j = 0; j < c.n; ++j) {
      long sum = residual_value(i, j, seed);
      for (int q = 0; q < team.size; ++q) {
        const int rank = team.world_rank(q);
        for (int x = 0; x < k; ++x) sum += a_value(rank, i, x, seed) * b_value(rank, j, x, seed);
      }
      out[std::size_t(i) * c.n + j] = static_cast<double>(sum);
    }
  return out;
}

template <class T>
void expect_results(const Case& c, const std::vector<double>& want_out, const std::vector<T>& out,
                    const std::vector<std::uint8_t>& y_bytes, const std::string& when) {
  std::size_t wrong_out = 0, wrong_y = 0, adjacent = 0, first_out = 0, first_y = 0;
  for (int i = 0; i < c.m; ++i) {
    double squares = 0;
    for (int j = 0; j < c.n; ++j) {
      const double v = want_out[std::size_t(i) * c.n + j];
      squares += v * v;
    }
    const double rms = 1.0 / std::sqrt(squares / c.n + kEps);
    for (int j = 0; j < c.n; ++j) {
      const std::size_t e = std::size_t(i) * c.n + j;
      if (to_float(out[e]) != want_out[e] && wrong_out++ == 0) first_out = e;
      const double y = want_out[e] * rms * gamma_value(j);
      if (c.fp8) {
        const std::uint8_t want = __nv_cvt_double_to_fp8(y / kFp8Scale, __NV_SATFINITE, __NV_E4M3);
        const int distance = std::abs(fp8_order(y_bytes[e]) - fp8_order(want));
        adjacent += distance == 1;
        if (distance > 1 && wrong_y++ == 0) first_y = e;
      } else {
        T got;
        std::memcpy(&got, y_bytes.data() + e * sizeof(T), sizeof(T));
        const double tol = 2 * ulp<T>() * std::abs(y) + ulp<T>() / 64;
        if (!(std::abs(to_float(got) - y) <= tol) && wrong_y++ == 0) first_y = e;
      }
    }
  }
  EXPECT_EQ(wrong_out, 0u) << when << ": " << wrong_out << " wrong residual_out elements; first at "
                           << first_out << ": " << to_float(out[first_out]) << " instead of "
                           << want_out[first_out];
  EXPECT_EQ(wrong_y, 0u) << when << ": " << wrong_y << " wrong y elements; first at " << first_y
                         << (c.fp8 ? " (fp8 code more than one step away)" : "");
  EXPECT_LE(adjacent, out.size() / 100) << when << ": fp8 codes one step from the reference";
}

/// Runs the case; returns the hash of the last direct run's residual_out and y (seed 3).
template <class T>
std::uint64_t run_case(const Case& c) {
  iris::Context& ctx = context();
  const iris::team team = c.team.size == 0 ? iris::team::world(ctx.world_size()) : c.team;
  const int me = team.index_of(ctx.rank());
  const int k = kTeamK / team.size;
  SCOPED_TRACE(std::string(iris::ops::to_string(c.pattern)) + " " +
               std::string(to_string(std::is_same_v<T, __half> ? DType::kF16 : DType::kBF16)) +
               ", M = " + std::to_string(c.m) + ", N = " + std::to_string(c.n) + ", K_r = " +
               std::to_string(k) + (c.fp8 ? ", y in fp8" : "") + (c.in_place ? ", in place" : "") +
               ", team of " + std::to_string(team.size) + ", rank " + std::to_string(ctx.rank()));
  const std::size_t mn = std::size_t(c.m) * c.n, bytes = mn * sizeof(T);
  const std::size_t y_size = c.fp8 ? mn : bytes;
  T *a, *b, *residual, *gamma, *out;
  void* y;
  EXPECT_EQ(cudaMalloc(&a, std::size_t(c.m) * k * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&b, std::size_t(c.n) * k * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&residual, bytes), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&gamma, c.n * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&out, bytes), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&y, y_size), cudaSuccess);
  cudaStream_t stream;
  EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);

  GemmAllReduceRmsNormArguments args;
  args.m = c.m;
  args.n = c.n;
  args.k = k;
  args.type = std::is_same_v<T, __half> ? DType::kF16 : DType::kBF16;
  args.a = a;
  args.b = b;
  args.residual = residual;
  args.gamma = gamma;
  args.residual_out = c.in_place ? residual : out;
  args.y = y;
  args.eps = kEps;
  if (c.fp8) {
    args.y_type = NormOutput::kFp8E4M3;
    args.y_scale = kFp8Scale;
  }
  args.pattern = c.pattern;
  args.team = c.team;
  EXPECT_TRUE(accepts(GemmAllReduceRmsNorm::can_implement(ctx, args)));
  EXPECT_EQ(GemmAllReduceRmsNorm::workspace_size(args), 0u);
  GemmAllReduceRmsNorm op(ctx);
  op.initialize(args, nullptr, stream);
  EXPECT_NE(op.pattern(), AllReduceNormPattern::kAuto);
  if (c.pattern != AllReduceNormPattern::kAuto) EXPECT_EQ(op.pattern(), c.pattern);
  EXPECT_GE(op.blocks(), 1);

  T* result_out = c.in_place ? residual : out;
  const auto fetch = [&](std::vector<T>& got_out, std::vector<std::uint8_t>& got_y) {
    got_out.resize(mn);
    got_y.resize(y_size);
    EXPECT_EQ(cudaMemcpy(got_out.data(), result_out, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(got_y.data(), y, y_size, cudaMemcpyDeviceToHost), cudaSuccess);
  };
  std::uint64_t last = 0;
  constexpr int kRuns = 4;
  for (int seed = 0; seed < kRuns; ++seed) {
    if (me == seed % team.size) delay<<<1, 1, 0, stream>>>(200000);
    fill<T><<<128, 256, 0, stream>>>(a, b, residual, gamma, c.m, c.n, k, ctx.rank(), seed);
    op.run(stream);
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    ctx.check_device_errors();
    std::vector<T> got_out;
    std::vector<std::uint8_t> got_y;
    fetch(got_out, got_y);
    expect_results<T>(c, reference_out(c, k, team, seed), got_out, got_y,
                      "run with seed " + std::to_string(seed));
    last = hash_results(got_out.data(), bytes, got_y.data(), y_size);
    expect_same_as_team(ctx, team, last, "seed " + std::to_string(seed));
  }

  // A graph of one run (seed 3's operands, and in place the residual refill), replayed into
  // cleared outputs: the same bits as the direct run.
  ctx.barrier();
  if (!c.in_place) EXPECT_EQ(cudaMemset(out, 0, bytes), cudaSuccess);
  EXPECT_EQ(cudaMemset(y, 0, y_size), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ops_test::replay_graph(ctx, stream, 10, [&](cudaStream_t s) {
    if (c.in_place)
      fill<T><<<128, 256, 0, s>>>(a, b, residual, gamma, c.m, c.n, k, ctx.rank(), kRuns - 1);
    op.run(s);
  });
  {
    std::vector<T> got_out;
    std::vector<std::uint8_t> got_y;
    fetch(got_out, got_y);
    EXPECT_EQ(hash_results(got_out.data(), bytes, got_y.data(), y_size), last)
        << "graph replays differ in their bits from the direct run";
  }
  ctx.barrier();
  cudaStreamDestroy(stream);
  for (void* p : {static_cast<void*>(a), static_cast<void*>(b), static_cast<void*>(residual),
                  static_cast<void*>(gamma), static_cast<void*>(out), y})
    cudaFree(p);
  return last;
}

// Decode shapes (one token; eight), rows that end mid-pass (N = 1032), more rows than the norm's
// blocks; each pattern, and both must give the same bits.
TEST(GemmAllReduceRmsNorm, BothPatternsBf16) {
  for (const auto& [m, n] : {std::pair{1, 8192}, std::pair{8, 4096}, std::pair{130, 1032}}) {
    const auto fused = run_case<__nv_bfloat16>({m, n, AllReduceNormPattern::kFused});
    const auto bulk = run_case<__nv_bfloat16>({m, n, AllReduceNormPattern::kBulkSynchronous});
    EXPECT_EQ(fused, bulk) << "M = " << m << ", N = " << n << ": the patterns differ in their bits";
  }
}

TEST(GemmAllReduceRmsNorm, Fp16AndInPlace) {
  run_case<__half>({33, 2048, AllReduceNormPattern::kFused});
  run_case<__half>({33, 2048, AllReduceNormPattern::kBulkSynchronous, false, true});
  run_case<__nv_bfloat16>({16, 4096, AllReduceNormPattern::kFused, false, true});
}

TEST(GemmAllReduceRmsNorm, Fp8Output) {
  const auto fused = run_case<__nv_bfloat16>({8, 4096, AllReduceNormPattern::kFused, true});
  const auto bulk =
      run_case<__nv_bfloat16>({8, 4096, AllReduceNormPattern::kBulkSynchronous, true});
  EXPECT_EQ(fused, bulk) << "the patterns' fp8 y differ in their bits";
  run_case<__half>({130, 1032, AllReduceNormPattern::kFused, true, true});
}

// Tensor-parallel pairs inside the world (4 ranks and more): each pair reduces its own members.
TEST(GemmAllReduceRmsNorm, Pairs) {
  iris::Context& ctx = context();
  if (ctx.world_size() < 4) GTEST_SKIP() << "teams smaller than the world need 4 ranks or more";
  const iris::team pair = ops_test::pair_of_neighbours(ctx);
  run_case<__nv_bfloat16>({8, 4096, AllReduceNormPattern::kFused, false, false, pair});
  run_case<__nv_bfloat16>({8, 4096, AllReduceNormPattern::kBulkSynchronous, true, false, pair});
}

TEST(GemmAllReduceRmsNorm, AutoPicksAPattern) {
  run_case<__nv_bfloat16>({4, 4096, AllReduceNormPattern::kAuto});
}

// Bad arguments are refused with a sentence before any collective step.
TEST(GemmAllReduceRmsNorm, RefusesBadArguments) {
  iris::Context& ctx = context();
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, std::size_t{6} << 20), cudaSuccess);
  auto* base = static_cast<char*>(p);
  GemmAllReduceRmsNormArguments args;
  args.m = 8;
  args.n = 4096;
  args.k = 64;
  args.a = base;
  args.b = base + (1 << 20);
  args.residual = base + (2 << 20);
  args.gamma = base + (3 << 20);
  args.residual_out = base + (4 << 20);
  args.y = base + (5 << 20);
  EXPECT_TRUE(accepts(GemmAllReduceRmsNorm::can_implement(ctx, args)));
  auto bad = args;
  bad.k = 100;
  EXPECT_TRUE(refuses(GemmAllReduceRmsNorm::can_implement(bad), "GEMM"));
  bad = args;
  bad.n = 1001;
  EXPECT_TRUE(refuses(GemmAllReduceRmsNorm::can_implement(bad), "1001"));
  bad = args;
  bad.type = DType::kF32;
  EXPECT_TRUE(refuses(GemmAllReduceRmsNorm::can_implement(bad), "bf16 or fp16"));
  bad = args;
  bad.y = base + (4 << 20);
  EXPECT_TRUE(refuses(GemmAllReduceRmsNorm::can_implement(bad), "y must not overlap residual_out"));
  bad = args;
  bad.y_type = NormOutput::kFp8E4M3;
  bad.y_scale = 0.f;
  EXPECT_TRUE(refuses(GemmAllReduceRmsNorm::can_implement(bad), "y_scale"));
  bad = args;
  bad.team = iris::team{(ctx.rank() + 1) % ctx.world_size(), 1, 1};
  EXPECT_TRUE(refuses(GemmAllReduceRmsNorm::can_implement(ctx, bad), "not a member"));
  GemmAllReduceRmsNorm op(ctx);
  EXPECT_THROW(op.run(), iris::Error);  // never initialized
  bad = args;
  bad.k = 100;
  EXPECT_THROW(op.initialize(bad), iris::Error);
  cudaFree(p);
  ctx.barrier();
}

}  // namespace
