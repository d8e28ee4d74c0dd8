// all-gather + GEMM (the column-parallel layer): rank r holds M / W rows of the activations
// and its own weights; every rank multiplies all M rows, M x K by K x N_r.
//
// Per shape: cuBLAS's GEMM of all rows alone (the compute floor), the baseline iris::ccl
// all_gather + cuBLAS GEMM, and each pattern of iris::ops::AllGatherGemm. Shapes: Flux's
// M = 4096, K = 12288, N = 49152 split over the ranks (N_r = N / W), and the PyTorch
// symmetric-memory recipe's N = 3584, K = 8192 with M = 4096 and 16384 (N per rank). Times are
// the slowest rank's median. NCCL is not run (it refuses ranks that share a GPU); the table says
// so.
//
//   iris-run -n 4 ./bench_all_gather_gemm [--quick] [--json all_gather_gemm_n4.json] [--samples 10]
//   --quick: the recipe's M = 4096 only, 5 samples (a few seconds)
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "iris/ccl.hpp"
#include "iris/iris.hpp"
#include "iris/ops/all_gather_gemm.hpp"
#include "report.hpp"

namespace {

using bf16 = __nv_bfloat16;

void cublas_check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw iris::Error(iris::Errc::kInternal, std::string("cuBLAS failed: ") + what);
}

__global__ void fill(bf16* x, std::size_t n, unsigned seed) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x)
    x[i] = __float2bfloat16(static_cast<float>((i * 2654435761u + seed) % 17) / 8.0f - 1.0f);
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

double tflops(double m, double n, double k, double ms) {
  return 2 * m * n * k / (ms * 1e9);
}

struct Shape {
  int m, n, k;  // n: this rank's columns
};

bool has_flag(int argc, char** argv, const char* flag) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], flag) == 0) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (!example::gpu_visible("bench_all_gather_gemm")) return 0;
  const bool quick = has_flag(argc, argv, "--quick");
  iris::ContextOptions options;
  options.heap_size = std::size_t{2} << 30;  // the shards and the gathered A (M x K bf16)
  auto ctx = iris::Context::from_env(options);
  const example::Repeats repeats{
      .warmup = quick ? 2 : 3,
      .samples = static_cast<int>(example::number_arg(argc, argv, "--samples", quick ? 5 : 10))};
  const std::string json = iris::bench::json_path_from_args(argc, argv);
  const int world = ctx.world_size(), me = ctx.rank();
  std::vector<Shape> shapes = {{4096, 3584, 8192}};
  if (!quick) {
    shapes.push_back({16384, 3584, 8192});
    shapes.push_back({4096, 49152 / world, 12288});
  }

  cublasHandle_t handle;
  cublas_check(cublasCreate(&handle), "cublasCreate");
  cudaStream_t stream;
  IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cublas_check(cublasSetStream(handle, stream), "cublasSetStream");
  const auto devices = iris::bench::device_of_each_rank(ctx.bootstrap());
  bool shared_gpu = false;
  for (int r = 0; r < world; ++r)
    for (int q = 0; q < r; ++q) shared_gpu |= devices[r] >= 0 && devices[r] == devices[q];
  iris::ccl::Communicator comm(ctx);
  std::vector<iris::bench::Row> rows;
  const auto lined_up = [&] { ctx.device_barrier(stream); };
  for (const Shape& s : shapes) {
    const std::size_t shard_count = std::size_t(s.m / world) * s.k;
    auto shard = ctx.zeros<bf16>(iris::Shape(shard_count));
    auto gathered = ctx.zeros<bf16>(iris::Shape(shard_count * world));
    bf16 *b, *c;
    IRIS_CUDA_CHECK(cudaMalloc(&b, sizeof(bf16) * std::size_t(s.n) * s.k));
    IRIS_CUDA_CHECK(cudaMalloc(&c, sizeof(bf16) * std::size_t(s.m) * s.n));
    fill<<<1024, 256>>>(shard.data(), shard_count, 1 + me);
    fill<<<1024, 256>>>(b, std::size_t(s.n) * s.k, 7 + me);
    IRIS_CUDA_CHECK(cudaDeviceSynchronize());
    ctx.barrier();
    const auto time = [&](auto&& enqueue) {
      const auto samples = example::time_calls_ms(stream, repeats, enqueue, lined_up);
      return iris::bench::slowest_rank(ctx.bootstrap(), example::summarize(samples).median);
    };
    const double gemm_only =
        time([&](long) { cublas_gemm(handle, c, gathered.data(), b, s.m, s.n, s.k); });
    const double baseline = time([&](long) {
      comm.all_gather(gathered.data(), shard.data(), shard_count, stream);
      cublas_gemm(handle, c, gathered.data(), b, s.m, s.n, s.k);
    });
    iris::bench::Row row;
    row.number("ranks", world, "%.0f").number("M", s.m, "%.0f").number("N_per_rank", s.n, "%.0f");
    row.number("K", s.k, "%.0f").number("cublas_gemm_ms", gemm_only);
    row.number("cublas_gemm_TFLOPs", tflops(s.m, s.n, s.k, gemm_only), "%.1f");
    row.number("ccl+cublas_ms", baseline);
    for (auto pattern : {iris::ops::AllGatherPattern::kBulkSynchronous,
                         iris::ops::AllGatherPattern::kProducerConsumer}) {
      iris::ops::AllGatherGemm op(ctx);
      op.initialize(
          {.m = s.m, .n = s.n, .k = s.k, .a = shard.data(), .b = b, .c = c, .pattern = pattern});
      const double ms = time([&](long) { op.run(stream); });
      const std::string name(iris::ops::to_string(pattern));
      row.number(name + "_ms", ms).number(name + "_speedup", baseline / ms);
      row.number(name + "_TFLOPs", tflops(s.m, s.n, s.k, ms), "%.1f");
    }
    row.text("nccl", shared_gpu ? "skipped: ranks share a GPU" : "not run");
    rows.push_back(row);
    ctx.barrier();
    cudaFree(b);
    cudaFree(c);
  }
  if (me == 0)
    iris::bench::report(
        "all-gather + GEMM (bf16), " + std::to_string(world) + " ranks", rows, json,
        std::string("M is all ranks together (each holds M / ranks rows), N is per rank; speedup "
                    "= (iris::ccl all_gather + cuBLAS) time / pattern time; TFLOP/s per rank; "
                    "times are the slowest rank's median") +
            (shared_gpu ? "; ranks share one GPU, so every pattern also shares its SMs" : ""));
  cublasDestroy(handle);
  return 0;
}
