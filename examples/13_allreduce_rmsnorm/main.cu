// 13_allreduce_rmsnorm — the end of a row-parallel layer: each rank holds partial sums x_r of
// the layer's output; residual_out = residual + sum_r x_r and y = RMSNorm(residual_out) * gamma
// on every rank, by iris::ops::AllReduceRmsNorm in its two patterns: the bulk-synchronous one
// (iris::ccl all_reduce, then a norm kernel) and the fused one (one kernel whose blocks pull the
// peers' rows through translate, between two barrier-object phases, and normalize in
// registers). With --fp8 1, y is quantized to fp8 e4m3 with a per-tensor scale (y_scale 1/64:
// y = saturate_to_e4m3(norm * gamma / y_scale)) and checked within one e4m3 step.
//
// Teaches: the op's adapter sequence on a team (can_implement, initialize, run), that x must
// live on the symmetric heap (peers read it) while the other tensors may be any device memory,
// and that every rank ends with the same bits.
//
//   iris-run -n 4 ./example_13_allreduce_rmsnorm [--tokens 8 --hidden 4096] [--fp8 1]
#include <cuda_bf16.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common/ops_example.hpp"
#include "iris/iris.hpp"
#include "iris/ops/allreduce_rmsnorm.hpp"

namespace {

// Multiples of 1/8 of magnitude below 8: exact in bf16, and so are their sums (residual_out is
// checked exactly); y is checked against a double reference to a few bf16 roundings.
float x_value(int rank, int t, int i) {
  return static_cast<float>((t + i + rank) % 5 - 2) / 4;
}
float residual_value(int t, int i) {
  return static_cast<float>((3 * t + i) % 7 - 3) / 8;
}
float gamma_value(int i) {
  return 1.0f + static_cast<float>(i % 4) / 8;
}

int run(int argc, char** argv) {
  const int tokens = static_cast<int>(example::number_arg(argc, argv, "--tokens", 8));
  const int hidden = static_cast<int>(example::number_arg(argc, argv, "--hidden", 4096));
  const bool fp8 = example::number_arg(argc, argv, "--fp8", 0) != 0;
  constexpr float kEps = 1e-6f, kScale = 1.f / 64;
  iris::Context ctx = iris::Context::from_env();
  const int rank = ctx.rank(), world = ctx.world_size();
  const std::size_t n = std::size_t(tokens) * hidden;

  // x on the heap (symmetric); residual, gamma and the outputs in ordinary device memory.
  std::vector<__nv_bfloat16> host_x(n), host_residual(n), host_gamma(hidden);
  for (int t = 0; t < tokens; ++t)
    for (int i = 0; i < hidden; ++i) {
      host_x[std::size_t(t) * hidden + i] = __float2bfloat16_rn(x_value(rank, t, i));
      host_residual[std::size_t(t) * hidden + i] = __float2bfloat16_rn(residual_value(t, i));
    }
  for (int i = 0; i < hidden; ++i) host_gamma[i] = __float2bfloat16_rn(gamma_value(i));
  auto x = ctx.empty<__nv_bfloat16>(iris::Shape(n));
  x.copy_from_host(host_x);
  __nv_bfloat16 *residual, *gamma, *out;
  void* y;
  const std::size_t y_bytes = fp8 ? n : n * sizeof(__nv_bfloat16);
  IRIS_CUDA_CHECK(cudaMalloc(&residual, n * sizeof(__nv_bfloat16)));
  IRIS_CUDA_CHECK(cudaMalloc(&gamma, hidden * sizeof(__nv_bfloat16)));
  IRIS_CUDA_CHECK(cudaMalloc(&out, n * sizeof(__nv_bfloat16)));
  IRIS_CUDA_CHECK(cudaMalloc(&y, y_bytes));
  IRIS_CUDA_CHECK(cudaMemcpy(residual, host_residual.data(), n * sizeof(__nv_bfloat16),
                             cudaMemcpyHostToDevice));
  IRIS_CUDA_CHECK(
      cudaMemcpy(gamma, host_gamma.data(), hidden * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice));

  // The reference, in double.
  std::vector<double> want_out(n), want_y(n);
  example::rmsnorm_reference(
      tokens, hidden, kEps,
      [&](int t, int i) {
        double s = residual_value(t, i);
        for (int r = 0; r < world; ++r) s += x_value(r, t, i);
        return s;
      },
      gamma_value, want_out, want_y);

  cudaStream_t stream;
  IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  bool ok = true;
  for (auto pattern : {iris::ops::AllReduceNormPattern::kBulkSynchronous,
                       iris::ops::AllReduceNormPattern::kFused}) {
    iris::ops::AllReduceRmsNormArguments args{
        .tokens = tokens,
        .hidden = hidden,
        .x = x.data(),
        .residual = residual,
        .gamma = gamma,
        .residual_out = out,
        .y = y,
        .eps = kEps,
        .y_type = fp8 ? iris::ops::NormOutput::kFp8E4M3 : iris::ops::NormOutput::kInput,
        .y_scale = fp8 ? kScale : 1.f,
        .pattern = pattern};
    const std::string name(iris::ops::to_string(pattern));
    if (auto status = iris::ops::AllReduceRmsNorm::can_implement(ctx, args); !status)
      return example::cannot_run(rank, name, status);
    iris::ops::AllReduceRmsNorm op(ctx);
    op.initialize(args);  // collective: every rank, same order
    IRIS_CUDA_CHECK(cudaMemsetAsync(out, 0, n * sizeof(__nv_bfloat16), stream));
    IRIS_CUDA_CHECK(cudaMemsetAsync(y, 0, y_bytes, stream));
    op.run(stream);
    IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
    ctx.check_device_errors();
    const bool pattern_ok =
        example::check_norm(rank, out, y, n, fp8, kScale, want_y,
                            [&](std::size_t e) { return static_cast<float>(want_out[e]); });
    ok = ok && pattern_ok;

    example::print_norm_time(
        rank, stream, [&](long) { op.run(stream); }, name,
        example::text("tokens %d hidden %d%s on %d ranks", tokens, hidden,
                      fp8 ? " (y in fp8 e4m3)" : "", world),
        pattern_ok);
    ctx.barrier();
  }
  IRIS_CUDA_CHECK(cudaStreamDestroy(stream));
  cudaFree(residual);
  cudaFree(gamma);
  cudaFree(out);
  cudaFree(y);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return example::run_main(argc, argv, run);
}
