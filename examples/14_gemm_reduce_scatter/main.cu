// 14_gemm_reduce_scatter — the row-parallel layer: every rank multiplies its K shard, and each
// rank ends with its block of rows of the sum over the ranks.
//
// Teaches: the same tile-store epilogue as the all-scatter (example 11), routed differently:
// each finished partial tile goes to the one rank that owns its rows, into this rank's slot of
// the owner's workspace, and raises the owner's flag for (tile, source); a reduction kernel on
// the owner waits for each tile from every rank and adds them in team order. The
// producer-consumer pattern turns the push into a pull: the GEMM stores its partial tiles only
// locally and raises its own flag per tile, and a reducer on a second stream, beside the GEMM,
// waits for each tile of its rows on every rank and reads them over the heap. The
// workgroup-specialized pattern runs that GEMM and that reducer as the two roles of one launch's
// blocks, with no second stream. The bulk-synchronous pattern (GEMM, then iris::ccl
// reduce_scatter) runs too; all must agree.
// Small-integer data, so every bf16 result is exact; exits non-zero when an element is wrong.
//
//   iris-run -n 4 ./example_14_gemm_reduce_scatter [--m 2048 --n 1024 --k 32] [--trace trace.json]
//   (k per rank; --trace: the fused run's tiles and reductions, merged over the ranks)
#include <cuda_bf16.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common/ops_example.hpp"
#include "iris/iris.hpp"
#include "iris/ops/gemm_reduce_scatter.hpp"
#include "iris/ops/trace.hpp"

namespace {

int run(int argc, char** argv) {
  auto ctx = iris::Context::from_env();
  const int world = ctx.world_size(), rank = ctx.rank();
  const int m = static_cast<int>(example::number_arg(argc, argv, "--m", 2048));
  const int n = static_cast<int>(example::number_arg(argc, argv, "--n", 1024));
  // k * world <= 256 keeps every sum exact in bf16.
  const int k = static_cast<int>(example::number_arg(argc, argv, "--k", 32));
  const char* trace_path = example::string_arg(argc, argv, "--trace");
  __nv_bfloat16 *a, *b;
  IRIS_CUDA_CHECK(cudaMalloc(&a, sizeof(*a) * m * k));
  IRIS_CUDA_CHECK(cudaMalloc(&b, sizeof(*b) * n * k));
  example::fill_operands<<<256, 256>>>(a, m, 0, /*k_shard=*/true, b, n, k, rank);
  const int rows = m / world;
  auto c = ctx.zeros<__nv_bfloat16>(iris::Shape(std::size_t(rows) * n));
  // This rank's rows of the sum, from the same formulas.
  std::vector<float> want(std::size_t(rows) * n, 0.0f);
  for (int q = 0; q < world; ++q)
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < n; ++j) {
        int sum = 0;
        for (int p = 0; p < k; ++p)
          sum += example::a_shard_value(q, rank * rows + i, p) * example::b_value(q, j, p);
        want[std::size_t(i) * n + j] += float(sum);
      }
  cudaStream_t stream;
  IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  iris::ops::Tracer tracer;

  bool all_right = true;
  for (auto pattern : {iris::ops::ReduceScatterPattern::kFusedSequential,
                       iris::ops::ReduceScatterPattern::kProducerConsumer,
                       iris::ops::ReduceScatterPattern::kWorkgroupSpecialized,
                       iris::ops::ReduceScatterPattern::kBulkSynchronous}) {
    const bool traced =
        trace_path != nullptr && pattern == iris::ops::ReduceScatterPattern::kFusedSequential;
    const iris::ops::GemmReduceScatterArguments args{.m = m,
                                                     .n = n,
                                                     .k = k,
                                                     .a = a,
                                                     .b = b,
                                                     .c = c.data(),
                                                     .pattern = pattern,
                                                     .trace = traced ? &tracer : nullptr};
    const std::string name(iris::ops::to_string(pattern));
    if (auto status = iris::ops::GemmReduceScatter::can_implement(ctx, args); !status)
      return example::cannot_run(rank, name, status);
    iris::ops::GemmReduceScatter op(ctx);
    op.initialize(args);
    IRIS_CUDA_CHECK(cudaMemsetAsync(c.data(), 0, c.bytes(), stream));
    op.run(stream);
    IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
    all_right &= example::check_c(rank, name, c.to_host(), want, "my rows of C are correct");
    ctx.barrier();
    if (traced) {
      tracer.write_json(ctx, trace_path);
      if (rank == 0) std::printf("trace of the fused run: %s\n", trace_path);
    }
    example::print_time(
        rank, stream, [&](long) { op.run(stream); },
        example::text("M %d, N %d, K %d x %d ranks", m, n, k, world), "GEMM + reduce-scatter",
        name);
    ctx.barrier();
  }
  cudaFree(a);
  cudaFree(b);
  return all_right ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return example::run_main(argc, argv, run);
}
