// Shared by examples 10-12 and 15: one program per overlap pattern of GEMM + all-scatter, the same
// data and the same check, so that the examples differ only in the pattern they ask for.
// Rank r computes its column block of C = A * [B_0 B_1 ...]^T; afterwards every rank checks all
// of C against a host reference (small-integer data: every bf16 or fp16 result is exact), and the
// op is timed. Exits non-zero when any element on any rank is wrong. `--trace file.json` also
// writes a per-tile timeline of one more run (all ranks merged); `--dtype fp16` runs the op in
// fp16 (A, B and C) instead of bf16.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/ops_example.hpp"
#include "iris/iris.hpp"
#include "iris/ops/gemm_all_scatter.hpp"
#include "iris/ops/trace.hpp"

namespace example {

/// to[i] = from[i] in fp16 (the operands' small integers are exact in both).
__global__ inline void bf16_to_fp16(const __nv_bfloat16* from, __half* to, int count) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x)
    to[i] = __float2half(__bfloat162float(from[i]));
}

inline int run_pattern(int argc, char** argv, iris::ops::AllScatterPattern pattern) {
  auto ctx = iris::Context::from_env();
  const int world = ctx.world_size(), rank = ctx.rank();
  const int m = static_cast<int>(example::number_arg(argc, argv, "--m", 2048));
  const int n = static_cast<int>(example::number_arg(argc, argv, "--n", 1024));  // per rank
  const int k = static_cast<int>(example::number_arg(argc, argv, "--k", 256));   // <= 256: exact
  __nv_bfloat16 *a, *b;
  IRIS_CUDA_CHECK(cudaMalloc(&a, sizeof(*a) * m * k));
  IRIS_CUDA_CHECK(cudaMalloc(&b, sizeof(*b) * n * k));
  fill_operands<<<256, 256>>>(a, m, 0, /*k_shard=*/false, b, n, k, rank);
  bool fp16 = false;
  for (int i = 1; i + 1 < argc; ++i)
    fp16 = fp16 || (std::strcmp(argv[i], "--dtype") == 0 && std::strcmp(argv[i + 1], "fp16") == 0);
  __half *a16 = nullptr, *b16 = nullptr;
  if (fp16) {
    IRIS_CUDA_CHECK(cudaMalloc(&a16, sizeof(*a16) * m * k));
    IRIS_CUDA_CHECK(cudaMalloc(&b16, sizeof(*b16) * n * k));
    bf16_to_fp16<<<256, 256>>>(a, a16, m * k);
    bf16_to_fp16<<<256, 256>>>(b, b16, n * k);
  }
  // C's elements are 2 bytes in either type: one buffer, read back as the type asks.
  auto c = ctx.zeros<__nv_bfloat16>(iris::Shape(std::size_t(m) * n * world));

  iris::ops::GemmAllScatter op(ctx);
  iris::ops::GemmAllScatterArguments args{
      .m = m,
      .n = n,
      .k = k,
      .type = fp16 ? iris::ops::DType::kF16 : iris::ops::DType::kBF16,
      .a = fp16 ? static_cast<const void*>(a16) : a,
      .b = fp16 ? static_cast<const void*>(b16) : b,
      .c = c.data(),
      .pattern = pattern};
  if (auto status = iris::ops::GemmAllScatter::can_implement(ctx, args); !status)
    return cannot_run(rank, std::string(to_string(pattern)), status);
  op.initialize(args);
  cudaStream_t stream;
  IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  op.run(stream);
  IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));

  const auto got = c.to_host();
  const auto value = [&](std::size_t e) {
    if (!fp16) return __bfloat162float(got[e]);
    __half_raw raw;
    std::memcpy(&raw.x, &got[e], sizeof(raw.x));
    return __half2float(__half(raw));
  };
  std::size_t wrong = 0;
  for (int i = 0; i < m; ++i)
    for (int q = 0; q < world; ++q)
      for (int j = 0; j < n; ++j) {
        int want = 0;
        for (int p = 0; p < k; ++p) want += a_value(i, p) * b_value(q, j, p);
        wrong += value((std::size_t(i) * world + q) * n + j) != float(want);
      }
  std::printf("rank %d: %s (%s): %s (%zu wrong)\n", rank,
              std::string(to_string(op.pattern())).c_str(), fp16 ? "fp16" : "bf16",
              wrong ? "WRONG" : "C is complete and correct", wrong);
  ctx.barrier();
  const double ms =
      example::median_ms(stream, {.warmup = 2, .samples = 11}, [&](long) { op.run(stream); });
  if (rank == 0)
    std::printf("M %d, N %d x %d ranks, K %d: %.3f ms per GEMM + all-scatter\n", m, n, world, k,
                ms);
  // --trace trace.json: one more run with per-tile events, merged over the ranks into a
  // Chrome/Perfetto trace (draw it with scripts/plot_trace.py).
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) != "--trace") continue;
    iris::ops::Tracer tracer;
    args.trace = &tracer;
    op.initialize(args);
    op.run(stream);
    IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
    tracer.write_json(ctx, argv[i + 1]);
    if (rank == 0) std::printf("trace: %s\n", argv[i + 1]);
  }
  ctx.barrier();
  return wrong ? 1 : 0;
}

/// The example's main: runs `pattern`, mapping what Iris reports to the examples' exit codes.
inline int run(int argc, char** argv, iris::ops::AllScatterPattern pattern) {
  return run_main(argc, argv,
                  [pattern](int count, char** args) { return run_pattern(count, args, pattern); });
}

}  // namespace example
