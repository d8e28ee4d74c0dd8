// GEMM + all-reduce (the row-parallel layer whose output every rank needs whole): rank r
// multiplies its K shard, M x (K / W) by (K / W) x N, and ends with all M x N of the sum.
//
// Per shape: cuBLAS's partial GEMM alone (the compute floor), the baseline cuBLAS GEMM into a
// symmetric buffer + iris::ccl all_reduce, and each pattern of iris::ops::GemmAllReduce (one-shot,
// two-shot, bulk-synchronous, and what kAuto picks). Shapes: the PyTorch symmetric-memory
// recipe's N = 3584, K = 8192 with M = 4096 and 16384. Times are the slowest rank's median.
// NCCL is not run (it refuses ranks that share a GPU); the table says so.
//
//   iris-run -n 4 ./bench_gemm_all_reduce [--quick] [--json gemm_all_reduce_n4.json] [--samples 10]
//   --quick: M = 4096 only, 5 samples (a few seconds)
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "iris/ccl.hpp"
#include "iris/iris.hpp"
#include "iris/ops/gemm_all_reduce.hpp"
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
  int m, n, k;  // k: all ranks together
};

bool has_flag(int argc, char** argv, const char* flag) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], flag) == 0) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (!example::gpu_visible("bench_gemm_all_reduce")) return 0;
  const bool quick = has_flag(argc, argv, "--quick");
  iris::ContextOptions options;
  options.heap_size = std::size_t{3} << 30;  // one-shot slots: W x M x N bf16
  auto ctx = iris::Context::from_env(options);
  const example::Repeats repeats{
      .warmup = quick ? 2 : 3,
      .samples = static_cast<int>(example::number_arg(argc, argv, "--samples", quick ? 5 : 10))};
  const std::string json = iris::bench::json_path_from_args(argc, argv);
  const int world = ctx.world_size(), me = ctx.rank();
  std::vector<Shape> shapes = {{4096, 3584, 8192}};
  if (!quick) shapes.push_back({16384, 3584, 8192});

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
    const int k = s.k / world;
    bf16 *a, *b;
    IRIS_CUDA_CHECK(cudaMalloc(&a, sizeof(bf16) * std::size_t(s.m) * k));
    IRIS_CUDA_CHECK(cudaMalloc(&b, sizeof(bf16) * std::size_t(s.n) * k));
    fill<<<1024, 256>>>(a, std::size_t(s.m) * k, 1 + me);
    fill<<<1024, 256>>>(b, std::size_t(s.n) * k, 7 + me);
    const std::size_t product = std::size_t(s.m) * s.n;
    auto partial = ctx.zeros<bf16>(iris::Shape(product));
    auto c = ctx.zeros<bf16>(iris::Shape(product));
    const auto time = [&](auto&& enqueue) {
      const auto samples = example::time_calls_ms(stream, repeats, enqueue, lined_up);
      return iris::bench::slowest_rank(ctx.bootstrap(), example::summarize(samples).median);
    };
    const double gemm_only =
        time([&](long) { cublas_gemm(handle, partial.data(), a, b, s.m, s.n, k); });
    const double baseline = time([&](long) {
      cublas_gemm(handle, partial.data(), a, b, s.m, s.n, k);
      comm.all_reduce(c.data(), partial.data(), product, iris::ccl::ReduceOp::kSum, stream);
    });
    iris::bench::Row row;
    row.number("ranks", world, "%.0f").number("M", s.m, "%.0f").number("N", s.n, "%.0f");
    row.number("K", s.k, "%.0f").number("cublas_gemm_ms", gemm_only);
    row.number("cublas_gemm_TFLOPs", tflops(s.m, s.n, k, gemm_only), "%.1f");
    row.number("cublas+ccl_ms", baseline);
    for (auto pattern :
         {iris::ops::AllReducePattern::kBulkSynchronous, iris::ops::AllReducePattern::kOneShot,
          iris::ops::AllReducePattern::kTwoShot}) {
      const iris::ops::GemmAllReduceArguments args{
          .m = s.m, .n = s.n, .k = k, .a = a, .b = b, .c = c.data(), .pattern = pattern};
      const std::string name(iris::ops::to_string(pattern));
      if (!iris::ops::GemmAllReduce::can_implement(ctx, args)) {
        row.text(name + "_ms", "n/a");
        continue;
      }
      iris::ops::GemmAllReduce op(ctx);
      op.initialize(args);
      const double ms = time([&](long) { op.run(stream); });
      row.number(name + "_ms", ms).number(name + "_speedup", baseline / ms);
      row.number(name + "_TFLOPs", tflops(s.m, s.n, k, ms), "%.1f");
    }
    const iris::ops::GemmAllReduceArguments auto_args{
        .m = s.m, .n = s.n, .k = k, .a = a, .b = b, .c = c.data()};
    row.text("auto_picks",
             std::string(iris::ops::to_string(iris::ops::GemmAllReduce::choose(ctx, auto_args))));
    row.text("nccl", shared_gpu ? "skipped: ranks share a GPU" : "not run");
    rows.push_back(row);
    ctx.barrier();
    cudaFree(a);
    cudaFree(b);
  }
  if (me == 0)
    iris::bench::report(
        "gemm + all-reduce (bf16), " + std::to_string(world) + " ranks", rows, json,
        std::string("K is all ranks together (each multiplies K / ranks); speedup = (cuBLAS + "
                    "iris::ccl all_reduce) time / pattern time; TFLOP/s per rank; times are the "
                    "slowest rank's median") +
            (shared_gpu ? "; ranks share one GPU, so every pattern also shares its SMs" : ""));
  cublasDestroy(handle);
  return 0;
}
