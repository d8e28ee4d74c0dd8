// GEMM + all-reduce + residual + RMSNorm (a row-parallel layer and the norm after it): rank r
// multiplies its K shard, M x (K / W) by (K / W) x N, and every rank ends with
// residual_out = residual + the sum and y = RMSNorm(residual_out) * gamma.
//
// Per shape: cuBLAS's partial GEMM alone (the compute floor); the baseline, cuBLAS GEMM into a
// symmetric buffer + iris::ccl all_reduce + the norm kernel (AllReduceRmsNorm bulk-synchronous on
// cuBLAS's output); and iris::ops::GemmAllReduceRmsNorm bulk-synchronous, fused, and fused with y
// in fp8 e4m3. Shapes: Llama-3 70B's MLP down projection (N = 8192, K = 28672) at decode sizes
// M = 1, 8, 32, 128 tokens and one prefill size M = 4096. Times are the slowest rank's median, in
// microseconds; speedup = baseline / pattern. NCCL is not run (it refuses ranks sharing a GPU).
//
//   iris-run -n 4 ./bench_gemm_allreduce_rmsnorm [--quick] [--json out.json] [--samples 10]
//   --quick: the decode sizes only, 5 samples (seconds)
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "iris/iris.hpp"
#include "iris/ops/gemm_allreduce_rmsnorm.hpp"
#include "report.hpp"

namespace {

using bf16 = __nv_bfloat16;

void cublas_check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw iris::Error(iris::Errc::kInternal, std::string("cuBLAS failed: ") + what);
}

__global__ void fill(bf16* x, std::size_t n, unsigned seed, float scale) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x)
    x[i] =
        __float2bfloat16(scale * (static_cast<float>((i * 2654435761u + seed) % 17) / 8.0f - 1.0f));
}

/// Row-major D (m x n) = A (m x k) * B^T (B: n x k), cuBLAS.
void cublas_gemm(cublasHandle_t handle, bf16* d, const bf16* a, const bf16* b, int m, int n,
                 int k) {
  const float alpha = 1, beta = 0;
  cublas_check(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, b, CUDA_R_16BF, k, a,
                            CUDA_R_16BF, k, &beta, d, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx");
}

bool has_flag(int argc, char** argv, const char* flag) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], flag) == 0) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (!example::gpu_visible("bench_gemm_allreduce_rmsnorm")) return 0;
  const bool quick = has_flag(argc, argv, "--quick");
  iris::ContextOptions options;
  options.heap_size = std::size_t{1} << 30;  // partial products and sums, M x N bf16 each
  auto ctx = iris::Context::from_env(options);
  const example::Repeats repeats{
      .warmup = quick ? 2 : 3,
      .samples = static_cast<int>(example::number_arg(argc, argv, "--samples", quick ? 5 : 10))};
  const std::string json = iris::bench::json_path_from_args(argc, argv);
  const int world = ctx.world_size(), me = ctx.rank();
  constexpr int kN = 8192, kK = 28672;
  std::vector<int> ms = {1, 8, 32, 128};
  if (!quick) ms.push_back(4096);

  cublasHandle_t handle;
  cublas_check(cublasCreate(&handle), "cublasCreate");
  cudaStream_t stream;
  IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cublas_check(cublasSetStream(handle, stream), "cublasSetStream");
  const auto devices = iris::bench::device_of_each_rank(ctx.bootstrap());
  bool shared_gpu = false;
  for (int r = 0; r < world; ++r)
    for (int q = 0; q < r; ++q) shared_gpu |= devices[r] >= 0 && devices[r] == devices[q];
  std::vector<iris::bench::Row> rows;
  const auto lined_up = [&] { ctx.device_barrier(stream); };
  const int k = kK / world;
  for (const int m : ms) {
    const std::size_t mn = std::size_t(m) * kN;
    bf16 *a, *b, *residual, *gamma, *out, *y;
    IRIS_CUDA_CHECK(cudaMalloc(&a, sizeof(bf16) * std::size_t(m) * k));
    IRIS_CUDA_CHECK(cudaMalloc(&b, sizeof(bf16) * std::size_t(kN) * k));
    IRIS_CUDA_CHECK(cudaMalloc(&residual, sizeof(bf16) * mn));
    IRIS_CUDA_CHECK(cudaMalloc(&gamma, sizeof(bf16) * kN));
    IRIS_CUDA_CHECK(cudaMalloc(&out, sizeof(bf16) * mn));
    IRIS_CUDA_CHECK(cudaMalloc(&y, sizeof(bf16) * mn));  // also holds the fp8 y
    fill<<<1024, 256>>>(a, std::size_t(m) * k, 1 + me, 1.f);
    fill<<<1024, 256>>>(b, std::size_t(kN) * k, 7 + me, 1.f / 64);
    fill<<<1024, 256>>>(residual, mn, 3, 1.f);
    fill<<<64, 256>>>(gamma, kN, 5, 1.f);
    IRIS_CUDA_CHECK(cudaDeviceSynchronize());
    auto x = ctx.zeros<bf16>(iris::Shape(mn));  // the baseline's cuBLAS output (symmetric)
    const auto time = [&](auto&& enqueue) {
      const auto samples = example::time_calls_ms(stream, repeats, enqueue, lined_up);
      return iris::bench::slowest_rank(ctx.bootstrap(), example::summarize(samples).median) * 1e3;
    };
    const double gemm_only = time([&](long) { cublas_gemm(handle, x.data(), a, b, m, kN, k); });
    iris::ops::AllReduceRmsNorm norm(ctx);
    norm.initialize({.tokens = m,
                     .hidden = kN,
                     .x = x.data(),
                     .residual = residual,
                     .gamma = gamma,
                     .residual_out = out,
                     .y = y,
                     .pattern = iris::ops::AllReduceNormPattern::kBulkSynchronous});
    const double baseline = time([&](long) {
      cublas_gemm(handle, x.data(), a, b, m, kN, k);
      norm.run(stream);
    });
    iris::bench::Row row;
    row.number("ranks", world, "%.0f").number("M", m, "%.0f").number("N", kN, "%.0f");
    row.number("K", kK, "%.0f").number("cublas_gemm_us", gemm_only, "%.1f");
    row.number("cublas+ccl+norm_us", baseline, "%.1f");
    struct Variant {
      const char* name;
      iris::ops::AllReduceNormPattern pattern;
      bool fp8;
    };
    for (const Variant& v :
         {Variant{"bulk_sync", iris::ops::AllReduceNormPattern::kBulkSynchronous, false},
          Variant{"fused", iris::ops::AllReduceNormPattern::kFused, false},
          Variant{"fused_fp8", iris::ops::AllReduceNormPattern::kFused, true}}) {
      const iris::ops::GemmAllReduceRmsNormArguments args{
          .m = m,
          .n = kN,
          .k = k,
          .a = a,
          .b = b,
          .residual = residual,
          .gamma = gamma,
          .residual_out = out,
          .y = y,
          .y_type = v.fp8 ? iris::ops::NormOutput::kFp8E4M3 : iris::ops::NormOutput::kInput,
          .y_scale = v.fp8 ? 1.f / 64 : 1.f,
          .pattern = v.pattern};
      if (auto status = iris::ops::GemmAllReduceRmsNorm::can_implement(ctx, args); !status) {
        row.text(std::string(v.name) + "_us", "n/a");
        continue;
      }
      iris::ops::GemmAllReduceRmsNorm op(ctx);
      op.initialize(args);
      const double us = time([&](long) { op.run(stream); });
      row.number(std::string(v.name) + "_us", us, "%.1f")
          .number(std::string(v.name) + "_speedup", baseline / us);
    }
    row.text("nccl", shared_gpu ? "skipped: ranks share a GPU" : "not run");
    rows.push_back(row);
    ctx.barrier();
    for (void* p : {static_cast<void*>(a), static_cast<void*>(b), static_cast<void*>(residual),
                    static_cast<void*>(gamma), static_cast<void*>(out), static_cast<void*>(y)})
      cudaFree(p);
  }
  if (me == 0)
    iris::bench::report(
        "gemm + all-reduce + residual + RMSNorm (bf16), " + std::to_string(world) + " ranks", rows,
        json,
        std::string("K is all ranks together (each multiplies K / ranks); baseline = cuBLAS GEMM + "
                    "iris::ccl all_reduce + norm kernel; speedup = baseline / pattern; times are "
                    "the slowest rank's median") +
            (shared_gpu ? "; ranks share one GPU, so every pattern also shares its SMs" : ""));
  cublasDestroy(handle);
  return 0;
}
