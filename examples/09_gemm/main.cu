// 09_gemm — the plain Hopper GEMM of iris::ops, the building block of every fused op after it.
//
// Teaches: CUTLASS's adapter sequence (can_implement -> workspace_size -> initialize -> run) on
// iris::ops::Gemm: D = A * B^T with A row-major M x K (activations) and B row-major N x K
// (weights), bf16 in, fp32 accumulate, bf16 out. can_implement answers with a sentence when a
// shape is not possible (try K = 100). The result is checked against a simple reference kernel
// and the GEMM is timed (TFLOP/s).
//
//   ./example_09_gemm [--m 4096] [--n 4096] [--k 4096]
#include <cuda_bf16.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "common/example.hpp"
#include "iris/host/error.hpp"
#include "iris/ops/gemm.hpp"

namespace {

__global__ void fill(__nv_bfloat16* x, std::size_t n, unsigned seed) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x)
    x[i] = __float2bfloat16(static_cast<float>((i * 2654435761u + seed) % 17) / 8.0f - 1.0f);
}

/// One thread per element of D, fp32 sums: slow and obviously right.
__global__ void reference(float* d, const __nv_bfloat16* a, const __nv_bfloat16* b, int m, int n,
                          int k) {
  const int i = blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return;
  float sum = 0;
  for (int p = 0; p < k; ++p)
    sum +=
        __bfloat162float(a[std::size_t(i) * k + p]) * __bfloat162float(b[std::size_t(j) * k + p]);
  d[std::size_t(i) * n + j] = sum;
}

}  // namespace

static int run(int argc, char** argv) {
  const int m = static_cast<int>(example::number_arg(argc, argv, "--m", 4096));
  const int n = static_cast<int>(example::number_arg(argc, argv, "--n", 4096));
  const int k = static_cast<int>(example::number_arg(argc, argv, "--k", 4096));
  __nv_bfloat16 *a, *b, *d;
  float* ref;
  IRIS_CUDA_CHECK(cudaMalloc(&a, sizeof(*a) * m * k));
  IRIS_CUDA_CHECK(cudaMalloc(&b, sizeof(*b) * n * k));
  IRIS_CUDA_CHECK(cudaMalloc(&d, sizeof(*d) * m * n));
  IRIS_CUDA_CHECK(cudaMalloc(&ref, sizeof(*ref) * m * n));
  fill<<<512, 256>>>(a, std::size_t(m) * k, 1);
  fill<<<512, 256>>>(b, std::size_t(n) * k, 2);

  iris::ops::GemmArguments args{.m = m, .n = n, .k = k, .a = a, .b = b, .d = d};
  if (auto status = iris::ops::Gemm::can_implement(args); !status) {
    std::fprintf(stderr, "cannot run this GEMM: %s\n", status.message.c_str());
    return 1;
  }
  void* workspace = nullptr;
  if (auto bytes = iris::ops::Gemm::workspace_size(args))
    IRIS_CUDA_CHECK(cudaMalloc(&workspace, bytes));
  iris::ops::Gemm gemm;
  gemm.initialize(args, workspace);
  gemm.run();

  reference<<<dim3((n + 127) / 128, m), 128>>>(ref, a, b, m, n, k);
  IRIS_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<__nv_bfloat16> got(std::size_t(m) * n);
  std::vector<float> want(got.size());
  IRIS_CUDA_CHECK(cudaMemcpy(got.data(), d, sizeof(got[0]) * got.size(), cudaMemcpyDeviceToHost));
  IRIS_CUDA_CHECK(
      cudaMemcpy(want.data(), ref, sizeof(want[0]) * want.size(), cudaMemcpyDeviceToHost));
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const float g = __bfloat162float(got[i]), w = want[i];
    if (!(std::fabs(g - w) <= std::fabs(w) / 128 + 1e-3f * std::sqrt(float(k)))) ++wrong;
  }
  if (wrong) {
    std::fprintf(stderr, "FAILED: %zu of %zu elements differ from the reference\n", wrong,
                 got.size());
    return 1;
  }
  cudaStream_t stream;
  IRIS_CUDA_CHECK(cudaStreamCreate(&stream));
  const double ms =
      example::median_ms(stream, {.warmup = 3, .samples = 11}, [&](long) { gemm.run(stream); });
  std::printf("GEMM %d x %d x %d bf16: correct; %.3f ms, %.1f TFLOP/s\n", m, n, k, ms,
              2.0 * m * n * k / (ms * 1e9));
  return 0;
}

int main(int argc, char** argv) {
  if (!example::gpu_visible("example_09_gemm")) return iris::examples::kNoDeviceExitCode;
  try {
    return run(argc, argv);
  } catch (const iris::Error& error) {
    std::fprintf(stderr, "example_09_gemm: %s\n", error.what());
    return iris::examples::exit_code(error);
  }
}
