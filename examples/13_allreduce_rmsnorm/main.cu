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
#include <cuda_fp8.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/example.hpp"
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

int fp8_order(unsigned char code) {
  return (code & 0x80) ? -(code & 0x7F) : (code & 0x7F);
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
  for (int t = 0; t < tokens; ++t) {
    double squares = 0;
    for (int i = 0; i < hidden; ++i) {
      double s = residual_value(t, i);
      for (int r = 0; r < world; ++r) s += x_value(r, t, i);
      want_out[std::size_t(t) * hidden + i] = s;
      squares += s * s;
    }
    const double scale = 1 / std::sqrt(squares / hidden + kEps);
    for (int i = 0; i < hidden; ++i)
      want_y[std::size_t(t) * hidden + i] =
          want_out[std::size_t(t) * hidden + i] * scale * gamma_value(i);
  }

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
    if (auto status = iris::ops::AllReduceRmsNorm::can_implement(ctx, args); !status) {
      std::printf("rank %d: cannot run: %s\n", rank, status.message.c_str());
      return 1;
    }
    iris::ops::AllReduceRmsNorm op(ctx);
    op.initialize(args);  // collective: every rank, same order
    IRIS_CUDA_CHECK(cudaMemsetAsync(out, 0, n * sizeof(__nv_bfloat16), stream));
    IRIS_CUDA_CHECK(cudaMemsetAsync(y, 0, y_bytes, stream));
    op.run(stream);
    IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
    ctx.check_device_errors();

    std::vector<__nv_bfloat16> got_out(n);
    std::vector<unsigned char> got_y(y_bytes);
    IRIS_CUDA_CHECK(
        cudaMemcpy(got_out.data(), out, n * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost));
    IRIS_CUDA_CHECK(cudaMemcpy(got_y.data(), y, y_bytes, cudaMemcpyDeviceToHost));
    std::vector<float> out_f(n), y_close(n);
    for (std::size_t k = 0; k < n; ++k) {
      out_f[k] = __bfloat162float(got_out[k]);
      if (fp8) {  // the reference converted the same way; the op's fp32 norm may round to the
                  // neighbouring e4m3 value
        const unsigned char want =
            __nv_cvt_double_to_fp8(want_y[k] / kScale, __NV_SATFINITE, __NV_E4M3);
        y_close[k] = std::abs(fp8_order(got_y[k]) - fp8_order(want)) <= 1 ? 1.f : 0.f;
      } else {
        __nv_bfloat16 v;
        std::memcpy(&v, got_y.data() + 2 * k, 2);
        const double e = std::abs(__bfloat162float(v) - want_y[k]);
        y_close[k] = e <= std::abs(want_y[k]) / 64 + 1.0 / 256 ? 1.f : 0.f;
      }
    }
    const bool pattern_ok =
        example::check(rank, "residual_out elements", out_f,
                       [&](std::size_t k) { return static_cast<float>(want_out[k]); }) &&
        example::check(rank, "y elements", y_close, [](std::size_t) { return 1.f; });
    ok = ok && pattern_ok;

    const double ms =
        example::median_ms(stream, {.warmup = 5, .samples = 21, .calls_per_sample = 10},
                           [&](long) { op.run(stream); });
    if (rank == 0)
      std::printf("%-17s tokens %d hidden %d%s on %d ranks: %s, %.2f us per call\n",
                  std::string(iris::ops::to_string(op.pattern())).c_str(), tokens, hidden,
                  fp8 ? " (y in fp8 e4m3)" : "", world, pattern_ok ? "correct" : "WRONG", ms * 1e3);
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
  if (!example::gpu_visible(argv[0])) return iris::examples::kNoDeviceExitCode;
  try {
    return run(argc, argv);
  } catch (const iris::Error& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return iris::examples::exit_code(error);
  }
}
