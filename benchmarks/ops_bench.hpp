// What the iris::ops benchmarks (GEMM + collective, collective + norm) share on top of
// report.hpp: their command line, bf16 operands, the cuBLAS GEMM of their baselines, and the
// timing of a pattern against a baseline on several ranks (the slowest rank's median), with the
// columns every such table has.
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "iris/iris.hpp"
#include "iris/ops/detail/tuning.hpp"
#include "nccl_baseline.hpp"
#include "report.hpp"

namespace iris::bench {

using bf16 = __nv_bfloat16;

/// A GEMM shape; which of n and k is per rank, each benchmark says.
struct Shape {
  int m, n, k;
};

/// The PyTorch symmetric-memory recipe's shape (M, N, K).
inline constexpr Shape kSymmetricMemoryRecipe{4096, 3584, 8192};

/// True when `flag` stands in argv.
inline bool has_flag(int argc, char** argv, const char* flag) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], flag) == 0) return true;
  return false;
}

/// True when argv holds `flag value` (`--shapes small`).
inline bool has_flag(int argc, char** argv, const char* flag, const char* value) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], flag) == 0 && std::strcmp(argv[i + 1], value) == 0) return true;
  return false;
}

/// The repeats of an ops benchmark: 3 warm-up calls and `--samples` (10) samples; with `quick`
/// (its --quick), 2 warm-up calls and 5 samples unless --samples says otherwise.
inline example::Repeats ops_repeats(int argc, char** argv, bool quick = false) {
  return {
      .warmup = quick ? 2 : 3,
      .samples = static_cast<int>(example::number_arg(argc, argv, "--samples", quick ? 5 : 10))};
}

inline void cublas_check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw iris::Error(iris::Errc::kInternal, std::string("cuBLAS failed: ") + what);
}

#if defined(__CUDACC__)
/// x[i] = scale * (a value in [-1, 1] in steps of 1/8, from i and `seed`).
__global__ inline void fill(bf16* x, std::size_t n, unsigned seed, float scale = 1.f) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x)
    x[i] =
        __float2bfloat16(scale * (static_cast<float>((i * 2654435761u + seed) % 17) / 8.0f - 1.0f));
}

/// This rank's operands of a GEMM whose K is split over the ranks, in device memory: A (m x k)
/// and B (n x k), filled with seeds 1 + rank and 7 + rank (B scaled by b_scale); freed with
/// this object.
struct ShardedOperands {
  ShardedOperands(int m, int n, int k, int rank, float b_scale = 1.f) {
    IRIS_CUDA_CHECK(cudaMalloc(&a, sizeof(bf16) * std::size_t(m) * k));
    IRIS_CUDA_CHECK(cudaMalloc(&b, sizeof(bf16) * std::size_t(n) * k));
    fill<<<1024, 256>>>(a, std::size_t(m) * k, 1 + rank);
    fill<<<1024, 256>>>(b, std::size_t(n) * k, 7 + rank, b_scale);
  }
  ~ShardedOperands() {
    cudaFree(a);
    cudaFree(b);
  }
  ShardedOperands(const ShardedOperands&) = delete;
  ShardedOperands& operator=(const ShardedOperands&) = delete;

  bf16* a = nullptr;
  bf16* b = nullptr;
};
#endif

/// TFLOP/s of an m x n x k GEMM that took `ms`.
inline double tflops(double m, double n, double k, double ms) {
  return 2 * m * n * k / (ms * 1e9);
}

/// A cuBLAS handle that queues on `stream`: the baselines' GEMM (bf16 in and out, fp32
/// accumulate).
class CublasGemm {
 public:
  explicit CublasGemm(cudaStream_t stream) {
    cublas_check(cublasCreate(&handle_), "cublasCreate");
    cublas_check(cublasSetStream(handle_, stream), "cublasSetStream");
  }
  ~CublasGemm() { cublasDestroy(handle_); }
  CublasGemm(const CublasGemm&) = delete;
  CublasGemm& operator=(const CublasGemm&) = delete;

  /// Row-major D (m x n, leading dimension ldd) = A (m x k) * B^T (B: n x k).
  void operator()(bf16* d, std::int64_t ldd, const bf16* a, const bf16* b, int m, int n,
                  int k) const {
    const float alpha = 1, beta = 0;
    cublas_check(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, b, CUDA_R_16BF, k,
                              a, CUDA_R_16BF, k, &beta, d, CUDA_R_16BF, static_cast<int>(ldd),
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  }
  /// Row-major D (m x n) = A (m x k) * B^T (B: n x k).
  void operator()(bf16* d, const bf16* a, const bf16* b, int m, int n, int k) const {
    (*this)(d, n, a, b, m, n, k);
  }

 private:
  cublasHandle_t handle_;
};

/// A stream of its own for a benchmark (non-blocking, so that nothing else orders it).
inline cudaStream_t nonblocking_stream() {
  cudaStream_t stream;
  IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return stream;
}

/// One ops benchmark on several ranks: its stream, the cuBLAS GEMM on it, whether ranks share a
/// GPU, the NCCL baseline where it runs, and the timing of each pattern and baseline.
/// Constructing it is collective. An NCCL that fails to start leaves every rank without the
/// baseline (nccl_baseline.hpp), not the job ended; rank 0 says which at once, so that a long
/// run shows it before its first table.
class OpsBench {
 public:
  OpsBench(Context& ctx, const example::Repeats& repeats)
      : ctx_(ctx),
        repeats_(repeats),
        stream_(nonblocking_stream()),
        gemm_(stream_),
        shared_gpu_(ranks_share_a_gpu(ctx.bootstrap())),
        nccl_(ctx) {
    if (ctx.rank() == 0) std::printf("%s\n", nccl_.note().c_str());
  }
  OpsBench(const OpsBench&) = delete;
  OpsBench& operator=(const OpsBench&) = delete;

  cudaStream_t stream() const { return stream_; }

  /// The baselines' GEMM, on stream(): CublasGemm's operator().
  template <class... Args>
  void cublas_gemm(Args... args) const {
    gemm_(args...);
  }

  /// Milliseconds per call of `enqueue(call)` (queued on stream()), the slowest rank's median;
  /// a device barrier lines the ranks up before each sample (collective).
  template <class Enqueue>
  double time_ms(Enqueue&& enqueue) {
    const auto samples =
        example::time_calls_ms(stream_, repeats_, enqueue, [&] { ctx_.device_barrier(stream_); });
    return slowest_rank(ctx_.bootstrap(), example::summarize(samples).median);
  }

  /// Times the cuBLAS GEMM alone, D (m x n) = A (m x k) * B^T (the compute floor), and adds its
  /// columns cublas_gemm_ms and cublas_gemm_TFLOPs to `row`.
  void time_cublas_gemm(Row& row, bf16* d, const bf16* a, const bf16* b, int m, int n, int k) {
    const double ms = time_ms([&](long) { gemm_(d, a, b, m, n, k); });
    row.number("cublas_gemm_ms", ms).number("cublas_gemm_TFLOPs", tflops(m, n, k, ms), "%.1f");
  }

  /// The row's first columns: ranks, M, N (named `n_key`), K.
  Row shape_row(int m, int n, int k, const char* n_key = "N") const {
    Row row;
    row.number("ranks", ctx_.world_size(), "%.0f").number("M", m, "%.0f").number(n_key, n, "%.0f");
    row.number("K", k, "%.0f");
    return row;
  }

  /// NCCL where it runs (one GPU per rank, NCCL in the build).
  const NcclBaseline& nccl() const { return nccl_; }

  /// The NCCL columns of `row`. Where NCCL runs: `<name>_<unit>`, the time of `enqueue(call)`
  /// (the cuBLAS + NCCL baseline, queued on stream()), and best_vs_nccl = that time / `best`
  /// (the fastest pattern's, in the same unit; above 1: faster than cuBLAS + NCCL). Elsewhere a
  /// column "nccl" that says why it was skipped.
  template <class Enqueue>
  void nccl_columns(Row& row, double best, Enqueue&& enqueue,
                    const std::string& name = "cublas+nccl", const char* unit = "ms") {
    if (!nccl_.available()) {
      row.text("nccl", nccl_.skipped());
      return;
    }
    const double scale = std::string(unit) == "us" ? 1e3 : 1.0;
    const double time = scale * time_ms(enqueue);
    row.number(name + "_" + unit, time).number("best_vs_nccl", time / best);
  }

  /// Rank 0 reports the table (report.hpp), `note` ending with a word on shared GPUs.
  void report(const std::string& title, const std::vector<Row>& rows, const std::string& json,
              const std::string& note) const {
    if (ctx_.rank() == 0)
      iris::bench::report(
          title, rows, json,
          note +
              (shared_gpu_ ? "; ranks share one GPU, so every pattern also shares its SMs" : "") +
              "; " + nccl_.note());
  }

 private:
  Context& ctx_;
  example::Repeats repeats_;
  cudaStream_t stream_;
  CublasGemm gemm_;
  bool shared_gpu_;
  NcclBaseline nccl_;
};

/// A pattern's columns: <name>_ms (or _<unit>) and <name>_speedup = baseline / time.
inline void pattern_columns(Row& row, const std::string& name, double time, double baseline,
                            const char* unit = "ms", const char* format = "%.3f") {
  row.number(name + "_" + unit, time, format).number(name + "_speedup", baseline / time);
}

/// The value after `--tune` in argv (the kAuto table to write), or "".
inline std::string tune_path_from_args(int argc, char** argv) {
  const char* path = example::string_arg(argc, argv, "--tune");
  return path != nullptr ? path : "";
}

/// --tune FILE: on rank 0, `entries` (each shape's fastest pattern) replace the entries of `op`'s
/// op for this world size in FILE, the rest of FILE kept, so that one file collects every op's
/// table at every world size measured (docs/ops.md, "kAuto: the measured table"). Nothing
/// without a path.
inline void write_tuning(const Context& ctx, const std::string& path,
                         const iris::ops::detail::TunedPattern& op,
                         std::vector<iris::ops::detail::TuningEntry> entries) {
  if (path.empty() || ctx.rank() != 0) return;
  iris::ops::detail::write_tuning_entries(path, op, ctx.world_size(), std::move(entries));
  std::printf("kAuto table: section \"%s\" of %s (IRIS_OPS_TUNING=%s)\n",
              std::string(iris::ops::detail::section_of(op)).c_str(), path.c_str(), path.c_str());
}

/// Two ops on the same operands, timed in alternation in one run.
struct Paired {
  double first_ms = 0, second_ms = 0;  ///< each one's median (the slowest rank's)
  double ratio = 0;   ///< median over consecutive pairs of second / first (the largest rank's)
  double spread = 0;  ///< median over the pairs of |second / first - 1| (the largest rank's)
};

/// Times `first()` and `second()` (each queues one run of a collective op, or of a single-rank
/// one, on `stream`) alternately: call c runs `second` when c is odd, so samples 2j and 2j + 1 hold
/// one of each, taken back to back, and drift (clocks, temperature) cancels out of their ratio.
/// `before()` queues what precedes each sample, untimed.
template <class First, class Second, class Before>
inline Paired paired_ms(iris::Context& ctx, cudaStream_t stream, const example::Repeats& repeats,
                        First&& first, Second&& second, Before&& before) {
  example::Repeats alternating = repeats;
  alternating.calls_per_sample = 1;
  alternating.samples = 2 * repeats.samples;
  const auto is_second = [](long call) { return call % 2 == 1; };
  const std::vector<double> samples = example::time_calls_ms(
      stream, alternating,
      [&](long call) {
        if (is_second(call))
          second();
        else
          first();
      },
      [&] {
        before();
        ctx.device_barrier(stream);
      });
  std::vector<double> firsts, seconds, ratios, spreads;
  for (std::size_t s = 0; s + 1 < samples.size(); s += 2) {
    double a = samples[s], b = samples[s + 1];
    if (is_second(alternating.warmup + static_cast<long>(s))) std::swap(a, b);
    firsts.push_back(a);
    seconds.push_back(b);
    ratios.push_back(b / a);
    spreads.push_back(std::abs(b / a - 1));
  }
  auto& bootstrap = ctx.bootstrap();
  return {slowest_rank(bootstrap, example::summarize(firsts).median),
          slowest_rank(bootstrap, example::summarize(seconds).median),
          slowest_rank(bootstrap, example::summarize(ratios).median),
          slowest_rank(bootstrap, example::summarize(spreads).median)};
}

}  // namespace iris::bench
