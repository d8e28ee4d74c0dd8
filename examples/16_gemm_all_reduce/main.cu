// 16_gemm_all_reduce — the row-parallel layer whose output every rank needs whole: every rank
// multiplies its K shard, and every rank ends with all of the sum over the ranks.
//
// Teaches: five ways to the same bits. Bulk-synchronous: the GEMM, then iris::ccl all_reduce.
// One-shot: the tile-store epilogue of example 11 stores each finished partial tile into this
// rank's slot on every rank and raises each rank's flag for (tile, source); every rank's
// reduction kernel waits per tile and adds all the slots in team order. Two-shot: the route of
// example 14 (each tile to the owner of its rows, the owner adds), then an all_gather of the
// reduced row blocks. Producer-consumer: the GEMM stores its partial tiles only locally and
// raises its own flag per tile; a reducer on a second stream, beside the GEMM, waits per tile
// for every rank's flag and pulls all the partials over the heap (a one-shot pull).
// Workgroup-specialized: that GEMM and that reducer as the two roles of one launch's blocks.
// Small-integer data, so every bf16 result is exact; exits non-zero when an element is wrong.
//
//   iris-run -n 4 ./example_16_gemm_all_reduce [--m 1024 --n 1024 --k 32] [--trace trace.json]
//   (k per rank; --m a multiple of 128 x ranks for two-shot; --trace: the one-shot GEMM's tiles)
#include <cuda_bf16.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common/ops_example.hpp"
#include "iris/iris.hpp"
#include "iris/ops/gemm_all_reduce.hpp"
#include "iris/ops/trace.hpp"

namespace {

int run(int argc, char** argv) {
  auto ctx = iris::Context::from_env();
  const int world = ctx.world_size(), rank = ctx.rank();
  const int m = static_cast<int>(example::number_arg(argc, argv, "--m", 1024));
  const int n = static_cast<int>(example::number_arg(argc, argv, "--n", 1024));
  // k * world <= 256 keeps every sum exact in bf16.
  const int k = static_cast<int>(example::number_arg(argc, argv, "--k", 32));
  const char* trace_path = example::string_arg(argc, argv, "--trace");
  __nv_bfloat16 *a, *b;
  IRIS_CUDA_CHECK(cudaMalloc(&a, sizeof(*a) * m * k));
  IRIS_CUDA_CHECK(cudaMalloc(&b, sizeof(*b) * n * k));
  example::fill_operands<<<256, 256>>>(a, m, 0, /*k_shard=*/true, b, n, k, rank);
  auto c = ctx.zeros<__nv_bfloat16>(iris::Shape(std::size_t(m) * n));
  // All of the sum, from the same formulas.
  std::vector<float> want(std::size_t(m) * n, 0.0f);
  for (int q = 0; q < world; ++q)
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        int sum = 0;
        for (int p = 0; p < k; ++p)
          sum += example::a_shard_value(q, i, p) * example::b_value(q, j, p);
        want[std::size_t(i) * n + j] += float(sum);
      }
  cudaStream_t stream;
  IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  iris::ops::Tracer tracer;

  bool all_right = true;
  for (auto pattern : {iris::ops::AllReducePattern::kOneShot, iris::ops::AllReducePattern::kTwoShot,
                       iris::ops::AllReducePattern::kProducerConsumer,
                       iris::ops::AllReducePattern::kWorkgroupSpecialized,
                       iris::ops::AllReducePattern::kBulkSynchronous}) {
    const bool traced = trace_path != nullptr && pattern == iris::ops::AllReducePattern::kOneShot;
    const iris::ops::GemmAllReduceArguments args{.m = m,
                                                 .n = n,
                                                 .k = k,
                                                 .a = a,
                                                 .b = b,
                                                 .c = c.data(),
                                                 .pattern = pattern,
                                                 .trace = traced ? &tracer : nullptr};
    const std::string name(iris::ops::to_string(pattern));
    if (auto status = iris::ops::GemmAllReduce::can_implement(ctx, args); !status) {
      if (rank == 0) std::printf("%s: skipped: %s\n", name.c_str(), status.message.c_str());
      continue;
    }
    iris::ops::GemmAllReduce op(ctx);
    op.initialize(args);
    IRIS_CUDA_CHECK(cudaMemsetAsync(c.data(), 0, c.bytes(), stream));
    op.run(stream);
    IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
    all_right &= example::check_c(rank, name, c.to_host(), want, "all of C is correct");
    ctx.barrier();
    if (traced) {
      tracer.write_json(ctx, trace_path);
      if (rank == 0) std::printf("trace of the one-shot run: %s\n", trace_path);
    }
    example::print_time(
        rank, stream, [&](long) { op.run(stream); },
        example::text("M %d, N %d, K %d x %d ranks", m, n, k, world), "GEMM + all-reduce", name);
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
