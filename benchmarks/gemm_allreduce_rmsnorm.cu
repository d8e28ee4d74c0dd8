// GEMM + all-reduce + residual + RMSNorm (a row-parallel layer and the norm after it): rank r
// multiplies its K shard, M x (K / W) by (K / W) x N, and every rank ends with
// residual_out = residual + the sum and y = RMSNorm(residual_out) * gamma.
//
// Per shape: cuBLAS's partial GEMM alone (the compute floor); the baseline, cuBLAS GEMM into a
// symmetric buffer + iris::ccl all_reduce + the norm kernel (AllReduceRmsNorm bulk-synchronous on
// cuBLAS's output); and iris::ops::GemmAllReduceRmsNorm bulk-synchronous, fused, and fused with y
// in fp8 e4m3. Shapes: Llama-3 70B's MLP down projection (N = 8192, K = 28672) at decode sizes
// M = 1, 8, 32, 128 tokens and one prefill size M = 4096. Times are the slowest rank's median, in
// microseconds; speedup = baseline / pattern. With one GPU per rank and a build that has NCCL,
// cuBLAS GEMM + NCCL all_reduce is timed too, without the norm kernel, so a lower bound of
// cuBLAS + NCCL + norm (cublas+nccl_all_reduce_us, and best_vs_nccl = its time / the fastest
// pattern's); NCCL refuses ranks that share a GPU, so there the table says it was skipped.
// The partial GEMM alone is also timed with iris::ops::Gemm, in the configuration the shape rule
// selects (gemm_config) and with the large tile forced, and the bulk-synchronous pattern once
// more with IRIS_GEMM_CONFIG=large_tile (docs/ops.md, "GEMM configurations").
//
//   iris-run -n 4 ./bench_gemm_allreduce_rmsnorm [--quick] [--json out.json] [--samples 10]
//   --quick: the decode sizes only, 5 samples (seconds)
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "iris/iris.hpp"
#include "iris/ops/gemm.hpp"
#include "iris/ops/gemm_allreduce_rmsnorm.hpp"
#include "ops_bench.hpp"

using iris::bench::bf16;

int main(int argc, char** argv) {
  if (!example::gpu_visible("bench_gemm_allreduce_rmsnorm")) return 0;
  const bool quick = iris::bench::has_flag(argc, argv, "--quick");
  iris::ContextOptions options;
  options.heap_size = std::size_t{1} << 30;  // partial products and sums, M x N bf16 each
  auto ctx = iris::Context::from_env(options);
  const example::Repeats repeats = iris::bench::ops_repeats(argc, argv, quick);
  const std::string json = iris::bench::json_path_from_args(argc, argv);
  const int world = ctx.world_size(), me = ctx.rank();
  constexpr int kN = 8192, kK = 28672;
  std::vector<int> ms = {1, 8, 32, 128};
  if (!quick) ms.push_back(4096);

  iris::bench::OpsBench bench(ctx, repeats);
  const cudaStream_t stream = bench.stream();
  std::vector<iris::bench::Row> rows;
  const int k = kK / world;
  for (const int m : ms) {
    const std::size_t mn = std::size_t(m) * kN;
    const iris::bench::ShardedOperands operands(m, kN, k, me, 1.f / 64);
    const bf16 *a = operands.a, *b = operands.b;
    bf16 *residual, *gamma, *out, *y;
    IRIS_CUDA_CHECK(cudaMalloc(&residual, sizeof(bf16) * mn));
    IRIS_CUDA_CHECK(cudaMalloc(&gamma, sizeof(bf16) * kN));
    IRIS_CUDA_CHECK(cudaMalloc(&out, sizeof(bf16) * mn));
    IRIS_CUDA_CHECK(cudaMalloc(&y, sizeof(bf16) * mn));  // also holds the fp8 y
    iris::bench::fill<<<1024, 256>>>(residual, mn, 3, 1.f);
    iris::bench::fill<<<64, 256>>>(gamma, kN, 5, 1.f);
    IRIS_CUDA_CHECK(cudaDeviceSynchronize());
    auto x = ctx.zeros<bf16>(iris::Shape(mn));  // the baseline's cuBLAS output (symmetric)
    const auto time_us = [&](auto&& enqueue) { return bench.time_ms(enqueue) * 1e3; };
    const double gemm_only = time_us([&](long) { bench.cublas_gemm(x.data(), a, b, m, kN, k); });
    iris::ops::AllReduceRmsNorm norm(ctx);
    norm.initialize({.tokens = m,
                     .hidden = kN,
                     .x = x.data(),
                     .residual = residual,
                     .gamma = gamma,
                     .residual_out = out,
                     .y = y,
                     .pattern = iris::ops::AllReduceNormPattern::kBulkSynchronous});
    const double baseline = time_us([&](long) {
      bench.cublas_gemm(x.data(), a, b, m, kN, k);
      norm.run(stream);
    });
    // The same partial GEMM with iris::ops::Gemm: the configuration the rule selects, and the
    // large tile forced.
    const iris::ops::GemmArguments gemm_args{
        .m = m, .n = kN, .k = k, .a = a, .b = b, .d = x.data()};
    const iris::ops::GemmConfig chosen = iris::ops::Gemm::select_config(gemm_args);
    const auto iris_gemm_us = [&](iris::ops::GemmConfig config) {
      iris::ops::GemmArguments forced = gemm_args;
      forced.config = config;
      iris::ops::Gemm gemm;
      gemm.initialize(forced, nullptr, stream);
      return time_us([&](long) { gemm.run(stream); });
    };
    const double iris_gemm = iris_gemm_us(chosen);
    const double iris_gemm_large = chosen == iris::ops::GemmConfig::kLargeTile
                                       ? iris_gemm
                                       : iris_gemm_us(iris::ops::GemmConfig::kLargeTile);
    iris::bench::Row row = bench.shape_row(m, kN, kK);
    row.number("cublas_gemm_us", gemm_only, "%.1f");
    row.text("gemm_config", std::string(iris::ops::to_string(chosen)));
    row.number("iris_gemm_us", iris_gemm, "%.1f");
    row.number("iris_gemm_large_tile_us", iris_gemm_large, "%.1f");
    row.number("cublas+ccl+norm_us", baseline, "%.1f");
    double best = 0, bulk = 0;
    struct Variant {
      const char* name;
      iris::ops::AllReduceNormPattern pattern;
      bool fp8;
      bool large_tile;  // IRIS_GEMM_CONFIG=large_tile while it is initialized
    };
    for (const Variant& v :
         {Variant{"bulk_sync", iris::ops::AllReduceNormPattern::kBulkSynchronous, false, false},
          Variant{"bulk_sync_large_tile", iris::ops::AllReduceNormPattern::kBulkSynchronous, false,
                  true},
          Variant{"fused", iris::ops::AllReduceNormPattern::kFused, false, false},
          Variant{"fused_fp8", iris::ops::AllReduceNormPattern::kFused, true, false}}) {
      if (v.large_tile && chosen == iris::ops::GemmConfig::kLargeTile && bulk > 0) {
        iris::bench::pattern_columns(row, v.name, bulk, baseline, "us", "%.1f");  // the same op
        continue;
      }
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
      const char* set = std::getenv("IRIS_GEMM_CONFIG");
      const std::string before = set != nullptr ? set : "";
      if (v.large_tile) setenv("IRIS_GEMM_CONFIG", "large_tile", 1);
      op.initialize(args);  // its GEMM reads IRIS_GEMM_CONFIG here
      if (v.large_tile && set != nullptr) setenv("IRIS_GEMM_CONFIG", before.c_str(), 1);
      if (v.large_tile && set == nullptr) unsetenv("IRIS_GEMM_CONFIG");
      const double us = time_us([&](long) { op.run(stream); });
      iris::bench::pattern_columns(row, v.name, us, baseline, "us", "%.1f");
      if (v.pattern == iris::ops::AllReduceNormPattern::kBulkSynchronous && !v.large_tile)
        bulk = us;
      if (!v.large_tile) best = best == 0 ? us : std::min(best, us);
    }
    // Without the norm kernel: a lower bound of cuBLAS + NCCL + norm.
    bench.nccl_columns(
        row, best,
        [&](long) {
          bench.cublas_gemm(x.data(), a, b, m, kN, k);
          bench.nccl().all_reduce(x.data(), x.data(), mn, stream);
        },
        "cublas+nccl_all_reduce", "us");
    rows.push_back(row);
    ctx.barrier();
    for (void* p : {static_cast<void*>(residual), static_cast<void*>(gamma),
                    static_cast<void*>(out), static_cast<void*>(y)})
      cudaFree(p);
  }
  bench.report("gemm + all-reduce + residual + RMSNorm (bf16), " + std::to_string(world) + " ranks",
               rows, json,
               "K is all ranks together (each multiplies K / ranks); baseline = cuBLAS GEMM + "
               "iris::ccl all_reduce + norm kernel; speedup = baseline / pattern; gemm_config = "
               "the configuration the shape rule selects for the partial GEMM (iris_gemm_us), "
               "*_large_tile = the large tile forced; times are the slowest rank's median");
  return 0;
}
