// GEMM + all-reduce (the row-parallel layer whose output every rank needs whole): rank r
// multiplies its K shard, M x (K / W) by (K / W) x N, and ends with all M x N of the sum.
//
// Per shape: cuBLAS's partial GEMM alone (the compute floor), the baseline cuBLAS GEMM into a
// symmetric buffer + iris::ccl all_reduce, and each pattern of iris::ops::GemmAllReduce (one-shot,
// two-shot, bulk-synchronous, producer-consumer, workgroup-specialized, and what kAuto picks).
// Shapes: the PyTorch symmetric-memory recipe's N = 3584, K = 8192 with M = 4096 and 16384. Times
// are the slowest rank's median. With one GPU per rank and a build that has NCCL, the baseline
// cuBLAS GEMM + NCCL all_reduce is timed too (cublas+nccl_ms, and best_vs_nccl = its time / the
// fastest pattern's); NCCL refuses ranks that share a GPU, so there the table says it was skipped.
//
// With --tune FILE, rank 0 writes each shape's fastest pattern into the "gemm_all_reduce" section
// of the kAuto table FILE, replacing that op's entries for this world size only
// (IRIS_OPS_TUNING=FILE; docs/ops.md).
//
//   iris-run -n 4 ./bench_gemm_all_reduce [--quick] [--json gemm_all_reduce_n4.json] [--samples 10]
//   [--tune t.json]
//   --quick: M = 4096 only, 5 samples (a few seconds)
#include <cstdio>
#include <string>
#include <vector>

#include "iris/ccl.hpp"
#include "iris/iris.hpp"
#include "iris/ops/gemm_all_reduce.hpp"
#include "ops_bench.hpp"

using iris::bench::bf16;

int main(int argc, char** argv) {
  if (!example::gpu_visible("bench_gemm_all_reduce")) return 0;
  const bool quick = iris::bench::has_flag(argc, argv, "--quick");
  iris::ContextOptions options;
  options.heap_size = std::size_t{3} << 30;  // one-shot slots: W x M x N bf16
  auto ctx = iris::Context::from_env(options);
  const example::Repeats repeats = iris::bench::ops_repeats(argc, argv, quick);
  const std::string json = iris::bench::json_path_from_args(argc, argv);
  const std::string tune = iris::bench::tune_path_from_args(argc, argv);
  const int world = ctx.world_size(), me = ctx.rank();
  // K of all ranks together
  std::vector<iris::bench::Shape> shapes = {iris::bench::kSymmetricMemoryRecipe};
  if (!quick) shapes.push_back({16384, 3584, 8192});

  iris::bench::OpsBench bench(ctx, repeats);
  const cudaStream_t stream = bench.stream();
  iris::ccl::Communicator comm(ctx);
  std::vector<iris::bench::Row> rows;
  std::vector<iris::ops::detail::TuningEntry> tuned;
  for (const iris::bench::Shape& s : shapes) {
    const int k = s.k / world;
    const iris::bench::ShardedOperands operands(s.m, s.n, k, me);
    const bf16 *a = operands.a, *b = operands.b;
    const std::size_t product = std::size_t(s.m) * s.n;
    auto partial = ctx.zeros<bf16>(iris::Shape(product));
    auto c = ctx.zeros<bf16>(iris::Shape(product));
    iris::bench::Row row = bench.shape_row(s.m, s.n, s.k);
    bench.time_cublas_gemm(row, partial.data(), a, b, s.m, s.n, k);
    const double baseline = bench.time_ms([&](long) {
      bench.cublas_gemm(partial.data(), a, b, s.m, s.n, k);
      comm.all_reduce(c.data(), partial.data(), product, iris::ccl::ReduceOp::kSum, stream);
    });
    row.number("cublas+ccl_ms", baseline);
    double best = 0;
    // (M, N, K of all ranks together), as the op's kAuto looks it up
    iris::ops::detail::TuningEntry fastest{world, s.m, s.n, s.k,
                                           iris::ops::AllReducePattern::kAuto};
    for (auto pattern :
         {iris::ops::AllReducePattern::kBulkSynchronous, iris::ops::AllReducePattern::kOneShot,
          iris::ops::AllReducePattern::kTwoShot, iris::ops::AllReducePattern::kProducerConsumer,
          iris::ops::AllReducePattern::kWorkgroupSpecialized}) {
      const iris::ops::GemmAllReduceArguments args{
          .m = s.m, .n = s.n, .k = k, .a = a, .b = b, .c = c.data(), .pattern = pattern};
      const std::string name(iris::ops::to_string(pattern));
      if (!iris::ops::GemmAllReduce::can_implement(ctx, args)) {
        row.text(name + "_ms", "n/a");
        continue;
      }
      iris::ops::GemmAllReduce op(ctx);
      op.initialize(args);
      const double ms = bench.time_ms([&](long) { op.run(stream); });
      iris::bench::pattern_columns(row, name, ms, baseline);
      row.number(name + "_TFLOPs", iris::bench::tflops(s.m, s.n, k, ms), "%.1f");
      if (best == 0 || ms < best) {
        best = ms;
        fastest.pattern = pattern;
      }
    }
    if (best > 0) tuned.push_back(fastest);
    const iris::ops::GemmAllReduceArguments auto_args{
        .m = s.m, .n = s.n, .k = k, .a = a, .b = b, .c = c.data()};
    row.text("auto_picks",
             std::string(iris::ops::to_string(iris::ops::GemmAllReduce::choose(ctx, auto_args))));
    bench.nccl_columns(row, best, [&](long) {
      bench.cublas_gemm(partial.data(), a, b, s.m, s.n, k);
      bench.nccl().all_reduce(partial.data(), c.data(), product, stream);
    });
    rows.push_back(row);
    ctx.barrier();
  }
  bench.report("gemm + all-reduce (bf16), " + std::to_string(world) + " ranks", rows, json,
               "K is all ranks together (each multiplies K / ranks); speedup = (cuBLAS + "
               "iris::ccl all_reduce) time / pattern time; TFLOP/s per rank; times are the "
               "slowest rank's median");
  iris::bench::write_tuning(ctx, tune, iris::ops::AllReducePattern{}, tuned);
  return 0;
}
