// all-reduce + residual add + RMSNorm in both patterns, on every rank: every element of
// residual_out and y is checked against a host reference computed in double from the same
// bf16/fp16 inputs; every member of a team must hold bit-identical results, run after run and
// over many CUDA-graph replays. A sequence of runs with x changing between them (and one rank
// late each time) checks that a run reads this run's x of every member and that no member
// overwrites x while a peer still reads it.
//
// fp8 output (y in e4m3, y = saturate(norm * gamma / y_scale)): residual_out is checked as above;
// y against a reference computed in double from the residual_out the op returned (so the input
// roundings are the op's) and converted the same way (round to nearest even, saturating to
// +-448). The op computes the norm in fp32 (its own summation order, rsqrtf), a few fp32 ulps from
// the double value, so an element whose exact value lies that close to an e4m3 rounding midpoint
// may round to the neighbour: every code must be the reference's or an adjacent one, and at most
// 1% may be adjacent (in practice almost all are exact). A wrong row's rms or a missing member
// moves codes by many steps.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "iris/iris.hpp"
#include "iris/ops/allreduce_rmsnorm.hpp"
#include "ops/common.cuh"

namespace {

using iris::ops::AllReduceNormPattern;
using iris::ops::AllReduceRmsNorm;
using iris::ops::AllReduceRmsNormArguments;
using iris::ops::DType;
using iris::ops::NormOutput;
using namespace ops_test;

template <class T>
constexpr DType dtype() {
  return std::is_same_v<T, __nv_bfloat16> ? DType::kBF16 : DType::kF16;
}

/// Reproducible values in [low, high), depending only on (seed, i).
double uniform(std::uint64_t seed, std::uint64_t i, double low, double high) {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + i + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return low + (high - low) * static_cast<double>(z >> 11) / 9007199254740992.0;
}

template <class T>
std::vector<T> values(std::size_t n, std::uint64_t seed, double low, double high) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = from_float<T>(uniform(seed, i, low, high));
  return v;
}

/// The inputs of one team: x of every member (the seed names the team and the phase), the
/// residual and gamma shared by the members.
template <class T>
struct Inputs {
  std::vector<std::vector<T>> x;  // [member]
  std::vector<T> residual, gamma;
};

template <class T>
Inputs<T> make_inputs(int tokens, int hidden, int members, std::uint64_t seed) {
  Inputs<T> in;
  const std::size_t n = std::size_t(tokens) * hidden;
  for (int m = 0; m < members; ++m) in.x.push_back(values<T>(n, seed * 131 + m + 1, -1.0, 1.0));
  in.residual = values<T>(n, seed * 131 + 100, -1.0, 1.0);
  in.gamma = values<T>(hidden, seed * 131 + 101, 0.5, 1.5);
  return in;
}

/// What a run must produce, in double, and how far from it each element may be.
struct Want {
  std::vector<double> out, y;          // residual + sum of x; RMSNorm of that times gamma
  std::vector<double> out_tol, y_tol;  // allowed |got - want|
};

/// The tolerances follow the roundings: residual_out is rounded once (fused) or the sum of x is
/// rounded before the residual is added (bulk-synchronous), so its error is below one ulp of
/// |residual| + sum |x_r| (this bound survives cancellation). y inherits that error through
/// gamma / rms and adds its own rounding. A missing or repeated member moves an element by
/// about 0.5, many times the tolerance.
template <class T>
Want reference(const Inputs<T>& in, int tokens, int hidden, double eps) {
  const std::size_t n = std::size_t(tokens) * hidden;
  Want w{std::vector<double>(n), std::vector<double>(n), std::vector<double>(n),
         std::vector<double>(n)};
  for (int t = 0; t < tokens; ++t) {
    double squares = 0;
    for (int i = 0; i < hidden; ++i) {
      const std::size_t k = std::size_t(t) * hidden + i;
      double s = to_float(in.residual[k]), magnitude = std::abs(s);
      for (const auto& x : in.x) {
        s += to_float(x[k]);
        magnitude += std::abs(to_float(x[k]));
      }
      w.out[k] = s;
      w.out_tol[k] = ulp<T>() * magnitude + 1e-6;
      squares += s * s;
    }
    const double scale = 1.0 / std::sqrt(squares / hidden + eps);
    for (int i = 0; i < hidden; ++i) {
      const std::size_t k = std::size_t(t) * hidden + i;
      const double g = to_float(in.gamma[i]);
      w.y[k] = w.out[k] * scale * g;
      w.y_tol[k] = 2 * ulp<T>() * std::abs(w.y[k]) + 1.5 * g * scale * w.out_tol[k] + ulp<T>() / 16;
    }
  }
  return w;
}

double fp8_value(std::uint8_t code) {
  __nv_fp8_e4m3 v;
  v.__x = code;
  return static_cast<float>(v);
}

/// y in e4m3 against the double reference from the op's own residual_out (see the top).
template <class T>
void expect_fp8(const std::vector<T>& got_out, const std::vector<std::uint8_t>& got_y,
                const std::vector<T>& gamma, int tokens, int hidden, double eps, float y_scale,
                const std::string& when) {
  std::size_t wrong = 0, adjacent = 0, saturated = 0, nan = 0, first = 0;
  std::uint8_t first_want = 0;
  for (int t = 0; t < tokens; ++t) {
    double squares = 0;
    for (int i = 0; i < hidden; ++i) {
      const double v = to_float(got_out[std::size_t(t) * hidden + i]);
      squares += v * v;
    }
    const double scale = 1.0 / std::sqrt(squares / hidden + eps);
    for (int i = 0; i < hidden; ++i) {
      const std::size_t k = std::size_t(t) * hidden + i;
      const double y = to_float(got_out[k]) * scale * to_float(gamma[i]) / y_scale;
      const std::uint8_t want = __nv_cvt_double_to_fp8(y, __NV_SATFINITE, __NV_E4M3);
      const std::uint8_t got = got_y[k];
      if ((got & 0x7F) == 0x7F) ++nan;
      if ((got & 0x7F) == 0x7E) ++saturated;
      const int distance = std::abs(fp8_order(got) - fp8_order(want));
      if (distance == 1) ++adjacent;
      if (distance > 1 && wrong++ == 0) {
        first = k;
        first_want = want;
      }
    }
  }
  const std::size_t n = std::size_t(tokens) * hidden;
  EXPECT_EQ(nan, 0u) << when << ": " << nan << " NaN codes in the fp8 y (saturation gives +-448)";
  EXPECT_EQ(wrong, 0u) << when << ": " << wrong << " fp8 y codes more than one step from the "
                       << "reference; first at " << first << ": 0x" << std::hex << int(got_y[first])
                       << " (" << fp8_value(got_y[first]) << ") instead of 0x" << int(first_want)
                       << std::dec << " (" << fp8_value(first_want) << ")";
  EXPECT_LE(adjacent, n / 100) << when << ": " << adjacent << " of " << n
                               << " fp8 y codes one step from the reference";
  // The scale is chosen so that the largest normalized values exceed 448 * y_scale.
  if (n >= 4096) EXPECT_GT(saturated, 0u) << when << ": no element saturated";
}

template <class T>
void expect_close(const std::vector<T>& got_out, const std::vector<T>& got_y, const Want& want,
                  const std::string& when, bool check_y = true) {
  std::size_t wrong_out = 0, wrong_y = 0, first_out = 0, first_y = 0;
  for (std::size_t k = 0; k < want.out.size(); ++k) {
    if (!(std::abs(to_float(got_out[k]) - want.out[k]) <= want.out_tol[k]) && wrong_out++ == 0)
      first_out = k;
    if (check_y && !(std::abs(to_float(got_y[k]) - want.y[k]) <= want.y_tol[k]) && wrong_y++ == 0)
      first_y = k;
  }
  EXPECT_EQ(wrong_out, 0u) << when << ": " << wrong_out << " wrong residual_out elements; first at "
                           << first_out << ": " << to_float(got_out[first_out]) << " instead of "
                           << want.out[first_out];
  if (check_y)
    EXPECT_EQ(wrong_y, 0u) << when << ": " << wrong_y << " wrong y elements; first at " << first_y
                           << ": " << to_float(got_y[first_y]) << " instead of " << want.y[first_y];
}

struct Case {
  int tokens, hidden;
  AllReduceNormPattern pattern;
  bool in_place = false;
  iris::team team{0, 0, 1};  // size 0: the world
  int max_blocks = 0;
  bool fp8 = false;  // y in e4m3 with kFp8Scale
};

/// The fp8 cases' y_scale: normalized values reach about 2.6 (gamma up to 1.5), so the largest
/// saturate at 448 * scale = 2.24, and the smallest fall into e4m3's subnormals.
constexpr float kFp8Scale = 1.f / 200;

std::string describe(const Case& c, DType type) {
  return std::string(iris::ops::to_string(c.pattern)) + " " + std::string(to_string(type)) +
         ", tokens = " + std::to_string(c.tokens) + ", hidden = " + std::to_string(c.hidden) +
         (c.in_place ? ", in place" : "") + ", team {" + std::to_string(c.team.start) + ", " +
         std::to_string(c.team.size) + ", " + std::to_string(c.team.stride) + "}" +
         (c.max_blocks ? ", max_blocks = " + std::to_string(c.max_blocks) : "") +
         (c.fp8 ? ", y in fp8 e4m3" : "");
}

template <class T>
void run_case(const Case& c) {
  iris::Context& ctx = context();
  const iris::team team = c.team.size == 0 ? iris::team::world(ctx.world_size()) : c.team;
  const int me = team.index_of(ctx.rank());
  ASSERT_GE(me, 0);
  SCOPED_TRACE(describe(c, dtype<T>()) + ", rank " + std::to_string(ctx.rank()));
  const std::size_t n = std::size_t(c.tokens) * c.hidden, bytes = n * sizeof(T);
  const std::size_t y_bytes = c.fp8 ? n : bytes;
  constexpr float kEps = 1e-5f;
  constexpr int kPhases = 2;  // two sets of inputs, alternated between runs
  std::vector<Inputs<T>> inputs;
  std::vector<Want> want;
  for (int ph = 0; ph < kPhases; ++ph) {
    inputs.push_back(make_inputs<T>(c.tokens, c.hidden, team.size, 1000 * ph + team.start + 7));
    want.push_back(reference(inputs[ph], c.tokens, c.hidden, kEps));
  }

  auto x = ctx.zeros<T>(iris::Shape(n));  // symmetric
  T *xs = nullptr, *residual = nullptr, *gamma = nullptr, *out = nullptr;
  void* y = nullptr;
  ASSERT_EQ(cudaMalloc(&xs, kPhases * bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&residual, kPhases * bytes), cudaSuccess);  // [phase]
  ASSERT_EQ(cudaMalloc(&gamma, kPhases * c.hidden * sizeof(T)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&out, bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&y, y_bytes), cudaSuccess);
  for (int ph = 0; ph < kPhases; ++ph) {
    cudaMemcpy(xs + ph * n, inputs[ph].x[me].data(), bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(residual + ph * n, inputs[ph].residual.data(), bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(gamma + ph * c.hidden, inputs[ph].gamma.data(), c.hidden * sizeof(T),
               cudaMemcpyHostToDevice);
  }
  // In place, residual_out is the op's residual: a scratch copy refreshed before every run.
  T* op_residual = c.in_place ? out : residual;
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);

  auto args_for = [&](int ph) {
    AllReduceRmsNormArguments args;
    args.tokens = c.tokens;
    args.hidden = c.hidden;
    args.type = dtype<T>();
    args.x = x.data();
    args.residual = c.in_place ? op_residual : residual + ph * n;
    args.gamma = gamma + ph * c.hidden;
    args.residual_out = out;
    args.y = y;
    args.eps = kEps;
    args.team = c.team;
    args.pattern = c.pattern;
    args.max_blocks = c.max_blocks;
    if (c.fp8) {
      args.y_type = NormOutput::kFp8E4M3;
      args.y_scale = kFp8Scale;
    }
    return args;
  };
  ASSERT_TRUE(accepts(AllReduceRmsNorm::can_implement(ctx, args_for(0))));
  EXPECT_EQ(AllReduceRmsNorm::workspace_size(args_for(0)), 0u);
  // One op per phase (their arguments differ in residual and gamma), made in the same order on
  // every rank.
  std::vector<AllReduceRmsNorm> ops;
  ops.reserve(kPhases);
  for (int ph = 0; ph < kPhases; ++ph) {
    ops.emplace_back(ctx);
    ops.back().initialize(args_for(ph));
    EXPECT_NE(ops.back().pattern(), AllReduceNormPattern::kAuto);
    EXPECT_GE(ops.back().blocks(), 1);
    EXPECT_LE(ops.back().blocks(), std::min(c.tokens, 64));
  }

  // A sequence of runs, x (and in place, residual) refreshed on the stream before each and one
  // rank late each time; every run's results are kept.
  constexpr int kRuns = 6;
  std::vector<T*> outs(kRuns);
  std::vector<void*> ys(kRuns);
  for (int r = 0; r < kRuns; ++r) {
    ASSERT_EQ(cudaMalloc(&outs[r], bytes), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&ys[r], y_bytes), cudaSuccess);
  }
  for (int r = 0; r < kRuns; ++r) {
    const int ph = r % kPhases;
    if (me == r % team.size) delay<<<1, 1, 0, stream>>>(200000);
    cudaMemcpyAsync(x.data(), xs + ph * n, bytes, cudaMemcpyDeviceToDevice, stream);
    if (c.in_place)
      cudaMemcpyAsync(op_residual, residual + ph * n, bytes, cudaMemcpyDeviceToDevice, stream);
    ops[ph].run(stream);
    cudaMemcpyAsync(outs[r], out, bytes, cudaMemcpyDeviceToDevice, stream);
    cudaMemcpyAsync(ys[r], y, y_bytes, cudaMemcpyDeviceToDevice, stream);
  }
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ctx.check_device_errors();
  std::vector<std::uint64_t> hashes(kPhases);
  const auto check = [&](const std::vector<T>& got_out, const std::vector<std::uint8_t>& got_y,
                         int ph, const std::string& when) {
    if (c.fp8) {
      expect_close(got_out, got_out, want[ph], when, false);
      expect_fp8(got_out, got_y, inputs[ph].gamma, c.tokens, c.hidden, kEps, kFp8Scale, when);
    } else {
      std::vector<T> y_values(n);
      std::memcpy(y_values.data(), got_y.data(), bytes);
      expect_close(got_out, y_values, want[ph], when);
    }
  };
  for (int r = 0; r < kRuns; ++r) {
    const int ph = r % kPhases;
    std::vector<T> got_out(n);
    std::vector<std::uint8_t> got_y(y_bytes);
    cudaMemcpy(got_out.data(), outs[r], bytes, cudaMemcpyDeviceToHost);
    cudaMemcpy(got_y.data(), ys[r], y_bytes, cudaMemcpyDeviceToHost);
    const std::string when = "run " + std::to_string(r);
    check(got_out, got_y, ph, when);
    const std::uint64_t h = hash_results(got_out.data(), bytes, got_y.data(), y_bytes);
    if (r < kPhases)
      hashes[ph] = h;
    else
      EXPECT_EQ(h, hashes[ph]) << when << " differs in its bits from run " << ph;
  }
  for (int ph = 0; ph < kPhases; ++ph)
    expect_same_as_team(ctx, team, hashes[ph], "phase " + std::to_string(ph));

  // A CUDA graph of one run of phase 1, replayed many times after clearing the outputs: the
  // same bits as the direct runs.
  ctx.barrier();
  cudaMemcpy(x.data(), xs + n, bytes, cudaMemcpyDeviceToDevice);
  ASSERT_EQ(cudaMemset(out, 0, bytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(y, 0, y_bytes), cudaSuccess);
  ctx.barrier();
  constexpr int kReplays = 25;
  ASSERT_NO_FATAL_FAILURE(replay_graph(ctx, stream, kReplays, [&](cudaStream_t s) {
    if (c.in_place) cudaMemcpyAsync(op_residual, residual + n, bytes, cudaMemcpyDeviceToDevice, s);
    ops[1].run(s);
  }));
  {
    std::vector<T> got_out(n);
    std::vector<std::uint8_t> got_y(y_bytes);
    cudaMemcpy(got_out.data(), out, bytes, cudaMemcpyDeviceToHost);
    cudaMemcpy(got_y.data(), y, y_bytes, cudaMemcpyDeviceToHost);
    check(got_out, got_y, 1, "after graph replays");
    const std::uint64_t h = hash_results(got_out.data(), bytes, got_y.data(), y_bytes);
    EXPECT_EQ(h, hashes[1]) << "graph replays differ in their bits from the direct runs";
  }

  ctx.barrier();
  cudaStreamDestroy(stream);
  for (int r = 0; r < kRuns; ++r) {
    cudaFree(outs[r]);
    cudaFree(ys[r]);
  }
  cudaFree(xs);
  cudaFree(residual);
  cudaFree(gamma);
  cudaFree(out);
  cudaFree(y);
}

// Shapes: one decode token; a row per block with every thread busy; more rows than blocks with
// rows that end mid-pass (1032 = 129 words of 8); an odd count.
TEST(AllReduceRmsNorm, FusedBf16) {
  run_case<__nv_bfloat16>({1, 4096, AllReduceNormPattern::kFused});
  run_case<__nv_bfloat16>({8, 8192, AllReduceNormPattern::kFused});
  run_case<__nv_bfloat16>({130, 1032, AllReduceNormPattern::kFused});
}

TEST(AllReduceRmsNorm, FusedFp16) {
  run_case<__half>({33, 2056, AllReduceNormPattern::kFused});
}

TEST(AllReduceRmsNorm, FusedOneBlockManyRows) {
  run_case<__nv_bfloat16>({20, 1032, AllReduceNormPattern::kFused, false, {0, 0, 1}, 1});
}

TEST(AllReduceRmsNorm, FusedInPlace) {
  run_case<__nv_bfloat16>({16, 4096, AllReduceNormPattern::kFused, true});
}

TEST(AllReduceRmsNorm, BulkSynchronous) {
  run_case<__nv_bfloat16>({8, 4096, AllReduceNormPattern::kBulkSynchronous});
  run_case<__nv_bfloat16>({130, 1032, AllReduceNormPattern::kBulkSynchronous});
  run_case<__half>({3, 2056, AllReduceNormPattern::kBulkSynchronous});
  run_case<__nv_bfloat16>({16, 1032, AllReduceNormPattern::kBulkSynchronous, true});
}

// y in fp8 e4m3, both patterns, both input types; rows that end mid-pass; in place.
TEST(AllReduceRmsNorm, Fp8Output) {
  const iris::team world{0, 0, 1};
  run_case<__nv_bfloat16>({8, 4096, AllReduceNormPattern::kFused, false, world, 0, true});
  run_case<__nv_bfloat16>({130, 1032, AllReduceNormPattern::kFused, true, world, 0, true});
  run_case<__half>({33, 2056, AllReduceNormPattern::kFused, false, world, 0, true});
  run_case<__nv_bfloat16>({8, 4096, AllReduceNormPattern::kBulkSynchronous, false, world, 0, true});
  run_case<__half>({3, 2056, AllReduceNormPattern::kBulkSynchronous, true, world, 0, true});
}

TEST(AllReduceRmsNorm, AutoPicksAPattern) {
  run_case<__nv_bfloat16>({4, 4096, AllReduceNormPattern::kAuto});
}

// Tensor-parallel groups inside the world: pairs of neighbours, and (at 4 ranks and more) the
// even and the odd ranks. Each group has its own inputs.
TEST(AllReduceRmsNorm, Teams) {
  iris::Context& ctx = context();
  const int world = ctx.world_size();
  if (world < 4) GTEST_SKIP() << "teams smaller than the world need 4 ranks or more";
  const iris::team pair = pair_of_neighbours(ctx);
  run_case<__nv_bfloat16>({8, 4096, AllReduceNormPattern::kFused, false, pair});
  run_case<__nv_bfloat16>({8, 4096, AllReduceNormPattern::kBulkSynchronous, false, pair});
  const iris::team parity{ctx.rank() % 2, world / 2, 2};
  run_case<__nv_bfloat16>({24, 2048, AllReduceNormPattern::kFused, false, parity});
}

// What only a Context can check: x off the heap, a team without this rank.
TEST(AllReduceRmsNorm, RefusesWhatPeersCannotRead) {
  iris::Context& ctx = context();
  const int tokens = 4, hidden = 1024;
  const std::size_t bytes = std::size_t(tokens) * hidden * 2;
  auto x = ctx.zeros<__nv_bfloat16>(iris::Shape(std::size_t(tokens) * hidden));
  void *local = nullptr, *out = nullptr, *y = nullptr;
  ASSERT_EQ(cudaMalloc(&local, bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&out, bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&y, bytes), cudaSuccess);
  AllReduceRmsNormArguments args;
  args.tokens = tokens;
  args.hidden = hidden;
  args.x = x.data();
  args.residual = local;
  args.gamma = local;
  args.residual_out = out;
  args.y = y;
  EXPECT_TRUE(accepts(AllReduceRmsNorm::can_implement(ctx, args)));
  auto bad = args;
  bad.x = local;
  EXPECT_TRUE(refuses(AllReduceRmsNorm::can_implement(ctx, bad), "symmetric"));
  AllReduceRmsNorm op(ctx);
  EXPECT_THROW(op.initialize(bad), iris::Error);  // refused before any collective step
  bad = args;
  bad.team = iris::team{(ctx.rank() + 1) % ctx.world_size(), 1, 1};
  EXPECT_TRUE(refuses(AllReduceRmsNorm::can_implement(ctx, bad), "not a member"));
  bad.team = iris::team{0, ctx.world_size() + 1, 1};
  EXPECT_TRUE(refuses(AllReduceRmsNorm::can_implement(ctx, bad), "does not fit"));
  EXPECT_THROW(op.run(), iris::Error);  // never initialized
  cudaFree(local);
  cudaFree(out);
  cudaFree(y);
  ctx.barrier();
}

}  // namespace
