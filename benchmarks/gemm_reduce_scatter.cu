// GEMM + reduce-scatter (the row-parallel layer): rank r multiplies its K shard, M x (K / W) by
// (K / W) x N, and ends with its M / W rows of the sum over the ranks.
//
// Per shape: cuBLAS's partial GEMM alone (the compute floor), the baseline cuBLAS GEMM into a
// symmetric buffer + iris::ccl reduce_scatter, and each pattern of iris::ops::GemmReduceScatter
// (bulk-synchronous, fused sequential, producer-consumer, workgroup-specialized), each with its
// speedup.
// Shapes: Flux's M = 4096, K = 49152 (all ranks), N = 12288 and the PyTorch symmetric-memory
// recipe's M = 4096, K = 8192, N = 3584. Times are the slowest rank's median. With one GPU per
// rank and a build that has NCCL, the baseline cuBLAS GEMM + NCCL reduce_scatter is timed too
// (cublas+nccl_ms, and best_vs_nccl = its time / the fastest pattern's); NCCL refuses ranks that
// share a GPU, so there the table says it was skipped.
//
// With --tune FILE, rank 0 writes each shape's fastest pattern into the "gemm_reduce_scatter"
// section of the kAuto table FILE, replacing that op's entries for this world size only
// (IRIS_OPS_TUNING=FILE; docs/ops.md).
//
//   iris-run -n 4 ./bench_gemm_reduce_scatter [--json gemm_reduce_scatter_n4.json] [--samples 10]
//   [--shapes small]   only the recipe's shape (a short pass)
//   [--tune t.json]    write the kAuto table's section
#include <cstdio>
#include <string>
#include <vector>

#include "iris/ccl.hpp"
#include "iris/iris.hpp"
#include "iris/ops/gemm_reduce_scatter.hpp"
#include "ops_bench.hpp"

using iris::bench::bf16;

int main(int argc, char** argv) {
  if (!example::gpu_visible("bench_gemm_reduce_scatter")) return 0;
  iris::ContextOptions options;
  options.heap_size = std::size_t{1} << 30;
  auto ctx = iris::Context::from_env(options);
  const example::Repeats repeats = iris::bench::ops_repeats(argc, argv);
  const std::string json = iris::bench::json_path_from_args(argc, argv);
  const std::string tune = iris::bench::tune_path_from_args(argc, argv);
  const int world = ctx.world_size(), me = ctx.rank();
  // K of all ranks together
  std::vector<iris::bench::Shape> shapes = {iris::bench::kSymmetricMemoryRecipe};
  if (!iris::bench::has_flag(argc, argv, "--shapes", "small"))
    shapes.push_back({4096, 12288, 49152});

  iris::bench::OpsBench bench(ctx, repeats);
  const cudaStream_t stream = bench.stream();
  iris::ccl::Communicator comm(ctx);
  std::vector<iris::bench::Row> rows;
  std::vector<iris::ops::detail::TuningEntry> tuned;
  for (const iris::bench::Shape& s : shapes) {
    const int k = s.k / world;
    const iris::bench::ShardedOperands operands(s.m, s.n, k, me);
    const bf16 *a = operands.a, *b = operands.b;
    const std::size_t part = std::size_t(s.m / world) * s.n;
    auto partial = ctx.zeros<bf16>(iris::Shape(std::size_t(s.m) * s.n));
    auto c = ctx.zeros<bf16>(iris::Shape(part));
    iris::bench::Row row = bench.shape_row(s.m, s.n, s.k);
    bench.time_cublas_gemm(row, partial.data(), a, b, s.m, s.n, k);
    const double baseline = bench.time_ms([&](long) {
      bench.cublas_gemm(partial.data(), a, b, s.m, s.n, k);
      comm.reduce_scatter(c.data(), partial.data(), part, iris::ccl::ReduceOp::kSum, stream);
    });
    row.number("cublas+ccl_ms", baseline);
    double best = 0;
    // (M, N, K of all ranks together), as the op's kAuto looks it up
    iris::ops::detail::TuningEntry fastest{world, s.m, s.n, s.k,
                                           iris::ops::ReduceScatterPattern::kAuto};
    for (auto pattern : {iris::ops::ReduceScatterPattern::kBulkSynchronous,
                         iris::ops::ReduceScatterPattern::kFusedSequential,
                         iris::ops::ReduceScatterPattern::kProducerConsumer,
                         iris::ops::ReduceScatterPattern::kWorkgroupSpecialized}) {
      iris::ops::GemmReduceScatter op(ctx);
      op.initialize(
          {.m = s.m, .n = s.n, .k = k, .a = a, .b = b, .c = c.data(), .pattern = pattern});
      const double ms = bench.time_ms([&](long) { op.run(stream); });
      iris::bench::pattern_columns(row, std::string(iris::ops::to_string(pattern)), ms, baseline);
      if (best == 0 || ms < best) {
        best = ms;
        fastest.pattern = pattern;
      }
    }
    if (best > 0) tuned.push_back(fastest);
    bench.nccl_columns(row, best, [&](long) {
      bench.cublas_gemm(partial.data(), a, b, s.m, s.n, k);
      bench.nccl().reduce_scatter(partial.data(), c.data(), part, stream);
    });
    rows.push_back(row);
    ctx.barrier();
  }
  bench.report("gemm + reduce-scatter (bf16), " + std::to_string(world) + " ranks", rows, json,
               "K is all ranks together (each multiplies K / ranks); speedup = (cuBLAS + "
               "iris::ccl reduce_scatter) time / pattern time; times are the slowest "
               "rank's median");
  iris::bench::write_tuning(ctx, tune, iris::ops::ReduceScatterPattern{}, tuned);
  return 0;
}
