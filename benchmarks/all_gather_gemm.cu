// all-gather + GEMM (the column-parallel layer): rank r holds M / W rows of the activations
// and its own weights; every rank multiplies all M rows, M x K by K x N_r.
//
// Per shape: cuBLAS's GEMM of all rows alone (the compute floor), the baseline iris::ccl
// all_gather + cuBLAS GEMM, and each pattern of iris::ops::AllGatherGemm (bulk-synchronous,
// producer-consumer, fused-mainloop). Shapes: Flux's M = 4096, K = 12288, N = 49152 split over
// the ranks (N_r = N / W), and the PyTorch symmetric-memory recipe's N = 3584, K = 8192 with
// M = 4096 and 16384 (N per rank). Times are the slowest rank's median. With one GPU per rank
// and a build that has NCCL, the baseline NCCL all_gather + cuBLAS GEMM is timed too
// (nccl+cublas_ms, and best_vs_nccl = its time / the fastest pattern's); NCCL refuses ranks that
// share a GPU, so there the table says it was skipped.
//
// With --tune FILE, rank 0 writes each shape's fastest pattern into the "all_gather_gemm" section
// of the kAuto table FILE, replacing that op's entries for this world size only
// (IRIS_OPS_TUNING=FILE; docs/ops.md).
//
//   iris-run -n 4 ./bench_all_gather_gemm [--quick] [--json all_gather_gemm_n4.json] [--samples 10]
//   [--tune t.json]
//   --quick: the recipe's M = 4096 only, 5 samples (a few seconds)
#include <cstdio>
#include <string>
#include <vector>

#include "iris/ccl.hpp"
#include "iris/iris.hpp"
#include "iris/ops/all_gather_gemm.hpp"
#include "ops_bench.hpp"

using iris::bench::bf16;

int main(int argc, char** argv) {
  if (!example::gpu_visible("bench_all_gather_gemm")) return 0;
  const bool quick = iris::bench::has_flag(argc, argv, "--quick");
  iris::ContextOptions options;
  options.heap_size = std::size_t{2} << 30;  // the shards and the gathered A (M x K bf16)
  auto ctx = iris::Context::from_env(options);
  const example::Repeats repeats = iris::bench::ops_repeats(argc, argv, quick);
  const std::string json = iris::bench::json_path_from_args(argc, argv);
  const std::string tune = iris::bench::tune_path_from_args(argc, argv);
  const int world = ctx.world_size(), me = ctx.rank();
  // N per rank
  std::vector<iris::bench::Shape> shapes = {iris::bench::kSymmetricMemoryRecipe};
  if (!quick) {
    shapes.push_back({16384, 3584, 8192});
    shapes.push_back({4096, 49152 / world, 12288});
  }

  iris::bench::OpsBench bench(ctx, repeats);
  const cudaStream_t stream = bench.stream();
  iris::ccl::Communicator comm(ctx);
  std::vector<iris::bench::Row> rows;
  std::vector<iris::ops::detail::TuningEntry> tuned;
  for (const iris::bench::Shape& s : shapes) {
    const std::size_t shard_count = std::size_t(s.m / world) * s.k;
    auto shard = ctx.zeros<bf16>(iris::Shape(shard_count));
    auto gathered = ctx.zeros<bf16>(iris::Shape(shard_count * world));
    bf16 *b, *c;
    IRIS_CUDA_CHECK(cudaMalloc(&b, sizeof(bf16) * std::size_t(s.n) * s.k));
    IRIS_CUDA_CHECK(cudaMalloc(&c, sizeof(bf16) * std::size_t(s.m) * s.n));
    iris::bench::fill<<<1024, 256>>>(shard.data(), shard_count, 1 + me);
    iris::bench::fill<<<1024, 256>>>(b, std::size_t(s.n) * s.k, 7 + me);
    IRIS_CUDA_CHECK(cudaDeviceSynchronize());
    ctx.barrier();
    iris::bench::Row row = bench.shape_row(s.m, s.n, s.k, "N_per_rank");
    bench.time_cublas_gemm(row, c, gathered.data(), b, s.m, s.n, s.k);
    const double baseline = bench.time_ms([&](long) {
      comm.all_gather(gathered.data(), shard.data(), shard_count, stream);
      bench.cublas_gemm(c, gathered.data(), b, s.m, s.n, s.k);
    });
    row.number("ccl+cublas_ms", baseline);
    double best = 0;
    // (M of all ranks, N per rank, K), as the op's kAuto looks it up
    iris::ops::detail::TuningEntry fastest{world, s.m, s.n, s.k,
                                           iris::ops::AllGatherPattern::kAuto};
    for (auto pattern : {iris::ops::AllGatherPattern::kBulkSynchronous,
                         iris::ops::AllGatherPattern::kProducerConsumer,
                         iris::ops::AllGatherPattern::kFusedMainloop}) {
      iris::ops::AllGatherGemm op(ctx);
      op.initialize(
          {.m = s.m, .n = s.n, .k = s.k, .a = shard.data(), .b = b, .c = c, .pattern = pattern});
      const double ms = bench.time_ms([&](long) { op.run(stream); });
      const std::string name(iris::ops::to_string(pattern));
      iris::bench::pattern_columns(row, name, ms, baseline);
      row.number(name + "_TFLOPs", iris::bench::tflops(s.m, s.n, s.k, ms), "%.1f");
      if (best == 0 || ms < best) {
        best = ms;
        fastest.pattern = pattern;
      }
    }
    if (best > 0) tuned.push_back(fastest);
    bench.nccl_columns(
        row, best,
        [&](long) {
          bench.nccl().all_gather(shard.data(), gathered.data(), shard_count * sizeof(bf16),
                                  stream);
          bench.cublas_gemm(c, gathered.data(), b, s.m, s.n, s.k);
        },
        "nccl+cublas");
    rows.push_back(row);
    ctx.barrier();
    cudaFree(b);
    cudaFree(c);
  }
  bench.report("all-gather + GEMM (bf16), " + std::to_string(world) + " ranks", rows, json,
               "M is all ranks together (each holds M / ranks rows), N is per rank; speedup "
               "= (iris::ccl all_gather + cuBLAS) time / pattern time; TFLOP/s per rank; "
               "times are the slowest rank's median");
  iris::bench::write_tuning(ctx, tune, iris::ops::AllGatherPattern{}, tuned);
  return 0;
}
