// 18_gemm_allreduce_rmsnorm — a row-parallel layer and the norm after it: each rank holds its K
// shard of the activations (A_r, tokens x K_r) and of the weights (B_r, hidden x K_r);
// residual_out = residual + sum_r A_r B_r^T and y = RMSNorm(residual_out) * gamma on every rank,
// by iris::ops::GemmAllReduceRmsNorm in its two patterns: bulk-synchronous (GEMM, iris::ccl
// all_reduce, norm kernel) and fused (GEMM, then one kernel that pulls the members' rows of
// partial products, adds them and the residual and normalizes in registers). With --fp8, y is
// quantized to fp8 e4m3 (y_scale 1/64) and checked against the reference converted the same way.
//
// Teaches: the op's adapter sequence on a team; that no operand needs the symmetric heap (the op
// keeps its own symmetric buffer of partial products); that every rank ends with the same bits.
//
//   iris-run -n 4 ./example_18_gemm_allreduce_rmsnorm [--tokens 8 --hidden 4096 --k-total 128]
//                                                     [--fp8 1]
#include <cuda_bf16.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common/ops_example.hpp"
#include "iris/iris.hpp"
#include "iris/ops/gemm_allreduce_rmsnorm.hpp"

namespace {

// Integers in {-1, 0, 1}: with K = k-total <= 256 (and |residual| <= 4) every partial product
// and every sum is exact in bf16, so residual_out is checked exactly; y against a double
// reference to a few bf16 roundings (fp8: within one e4m3 step).
int a_value(int rank, int t, int k) {
  return (t * 7 + k * 5 + rank * 3) % 3 - 1;
}
int b_value(int rank, int i, int k) {
  return (i * 5 + k + rank * 11) % 3 - 1;
}
float residual_value(int t, int i) {
  return static_cast<float>((3 * t + i) % 9 - 4);
}
float gamma_value(int i) {
  return 1.0f + static_cast<float>(i % 4) / 8;
}

int run(int argc, char** argv) {
  const int tokens = static_cast<int>(example::number_arg(argc, argv, "--tokens", 8));
  const int hidden = static_cast<int>(example::number_arg(argc, argv, "--hidden", 4096));
  const int k_total = static_cast<int>(example::number_arg(argc, argv, "--k-total", 128));
  const bool fp8 = example::number_arg(argc, argv, "--fp8", 0) != 0;
  constexpr float kEps = 1e-6f, kScale = 1.f / 64;
  iris::Context ctx = iris::Context::from_env();
  const int rank = ctx.rank(), world = ctx.world_size();
  if (k_total % (8 * world) != 0) {
    if (rank == 0) std::printf("--k-total must be a multiple of 8 x %d ranks\n", world);
    return 1;
  }
  const int k = k_total / world;
  const std::size_t n = std::size_t(tokens) * hidden;

  std::vector<__nv_bfloat16> host_a(std::size_t(tokens) * k), host_b(std::size_t(hidden) * k),
      host_residual(n), host_gamma(hidden);
  for (int t = 0; t < tokens; ++t)
    for (int x = 0; x < k; ++x)
      host_a[std::size_t(t) * k + x] = __int2bfloat16_rn(a_value(rank, t, x));
  for (int i = 0; i < hidden; ++i)
    for (int x = 0; x < k; ++x)
      host_b[std::size_t(i) * k + x] = __int2bfloat16_rn(b_value(rank, i, x));
  for (std::size_t e = 0; e < n; ++e)
    host_residual[e] = __float2bfloat16_rn(residual_value(e / hidden, e % hidden));
  for (int i = 0; i < hidden; ++i) host_gamma[i] = __float2bfloat16_rn(gamma_value(i));
  __nv_bfloat16 *a, *b, *residual, *gamma, *out;
  void* y;
  const std::size_t y_bytes = fp8 ? n : n * sizeof(__nv_bfloat16);
  IRIS_CUDA_CHECK(cudaMalloc(&a, host_a.size() * sizeof(__nv_bfloat16)));
  IRIS_CUDA_CHECK(cudaMalloc(&b, host_b.size() * sizeof(__nv_bfloat16)));
  IRIS_CUDA_CHECK(cudaMalloc(&residual, n * sizeof(__nv_bfloat16)));
  IRIS_CUDA_CHECK(cudaMalloc(&gamma, hidden * sizeof(__nv_bfloat16)));
  IRIS_CUDA_CHECK(cudaMalloc(&out, n * sizeof(__nv_bfloat16)));
  IRIS_CUDA_CHECK(cudaMalloc(&y, y_bytes));
  IRIS_CUDA_CHECK(cudaMemcpy(a, host_a.data(), host_a.size() * 2, cudaMemcpyHostToDevice));
  IRIS_CUDA_CHECK(cudaMemcpy(b, host_b.data(), host_b.size() * 2, cudaMemcpyHostToDevice));
  IRIS_CUDA_CHECK(cudaMemcpy(residual, host_residual.data(), n * 2, cudaMemcpyHostToDevice));
  IRIS_CUDA_CHECK(cudaMemcpy(gamma, host_gamma.data(), hidden * 2, cudaMemcpyHostToDevice));

  // The reference, in double: every rank's partial products, summed.
  std::vector<double> want_out(n), want_y(n);
  example::rmsnorm_reference(
      tokens, hidden, kEps,
      [&](int t, int i) {
        double s = residual_value(t, i);
        for (int r = 0; r < world; ++r)
          for (int x = 0; x < k; ++x) s += a_value(r, t, x) * b_value(r, i, x);
        return s;
      },
      gamma_value, want_out, want_y);

  cudaStream_t stream;
  IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  bool ok = true;
  for (auto pattern : {iris::ops::AllReduceNormPattern::kBulkSynchronous,
                       iris::ops::AllReduceNormPattern::kFused}) {
    iris::ops::GemmAllReduceRmsNormArguments args{
        .m = tokens,
        .n = hidden,
        .k = k,
        .a = a,
        .b = b,
        .residual = residual,
        .gamma = gamma,
        .residual_out = out,
        .y = y,
        .eps = kEps,
        .y_type = fp8 ? iris::ops::NormOutput::kFp8E4M3 : iris::ops::NormOutput::kInput,
        .y_scale = fp8 ? kScale : 1.f,
        .pattern = pattern};
    const std::string name(iris::ops::to_string(pattern));
    if (auto status = iris::ops::GemmAllReduceRmsNorm::can_implement(ctx, args); !status)
      return example::cannot_run(rank, name, status);
    iris::ops::GemmAllReduceRmsNorm op(ctx);
    op.initialize(args);  // collective: every rank, same order
    IRIS_CUDA_CHECK(cudaMemsetAsync(out, 0, n * sizeof(__nv_bfloat16), stream));
    IRIS_CUDA_CHECK(cudaMemsetAsync(y, 0, y_bytes, stream));
    op.run(stream);
    IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
    ctx.check_device_errors();
    // residual_out: exact for k-total <= 256; beyond, a partial or a sum may round (one bf16
    // step).
    const bool pattern_ok =
        example::check_norm(rank, out, y, n, fp8, kScale, want_y, [&](std::size_t e) {
          const float w = static_cast<float>(want_out[e]);
          return k_total <= 256 ? w : __bfloat162float(__float2bfloat16_rn(w));
        });
    ok = ok && pattern_ok;

    example::print_norm_time(
        rank, stream, [&](long) { op.run(stream); }, name,
        example::text("tokens %d hidden %d K %d (%d per rank)%s on %d ranks", tokens, hidden,
                      k_total, k, fp8 ? ", y in fp8 e4m3" : "", world),
        pattern_ok);
    ctx.barrier();
  }
  IRIS_CUDA_CHECK(cudaStreamDestroy(stream));
  for (void* p : {static_cast<void*>(a), static_cast<void*>(b), static_cast<void*>(residual),
                  static_cast<void*>(gamma), static_cast<void*>(out), y})
    cudaFree(p);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return example::run_main(argc, argv, run);
}
