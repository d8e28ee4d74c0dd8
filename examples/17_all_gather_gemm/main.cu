// 17_all_gather_gemm — the column-parallel layer: the activations are sharded by rows across
// the ranks, and every rank multiplies all of them by its own weights.
//
// Teaches: the producer-consumer decomposition (PyTorch's async tensor parallelism): the GEMM
// of the local shard starts at once, while a second stream waits for a team barrier (every
// rank's shard is ready) and pulls the peers' shards through the symmetric heap with the copy
// engines, rank + 1 first, then rank + 2, ... (each rank pulls from a different peer at each
// step); the GEMM of each shard runs as soon as its copy's event fires. Then the fused-mainloop
// pattern, a mainloop wait hook: one persistent GEMM over the gathered A, whose producer warp,
// before it loads a tile's rows of A, waits (bounded, acquire at system scope, then a proxy
// fence for the TMA loads) for the flag of the shard that holds them; the copy engines fill the
// gathered A in the same order, each copy followed by a copy of the run's number into its
// shard's flag. One launch instead of one per shard, and no SM spent on moving data. The
// bulk-synchronous pattern (iris::ccl all_gather, then one GEMM) runs too; all must agree, on
// two runs each (the fused pattern's flags count runs and are never reset). Small-integer data,
// so every bf16 result is exact; exits non-zero when an element is wrong.
//
//   iris-run -n 4 ./example_17_all_gather_gemm [--m 2048 --n 1024 --k 256]   (m: all ranks)
#include <cuda_bf16.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common/ops_example.hpp"
#include "iris/iris.hpp"
#include "iris/ops/all_gather_gemm.hpp"

namespace {

int run(int argc, char** argv) {
  auto ctx = iris::Context::from_env();
  const int world = ctx.world_size(), rank = ctx.rank();
  const int m = static_cast<int>(example::number_arg(argc, argv, "--m", 2048));
  const int n = static_cast<int>(example::number_arg(argc, argv, "--n", 1024));
  // k <= 256 keeps every dot product exact in bf16.
  const int k = static_cast<int>(example::number_arg(argc, argv, "--k", 256));
  const int rows = m / world;
  auto shard = ctx.zeros<__nv_bfloat16>(iris::Shape(std::size_t(rows) * k));  // peers read it
  __nv_bfloat16 *b, *c;
  IRIS_CUDA_CHECK(cudaMalloc(&b, sizeof(*b) * n * k));
  IRIS_CUDA_CHECK(cudaMalloc(&c, sizeof(*c) * m * n));
  // This rank's shard holds rows [rank * rows, (rank + 1) * rows) of the whole A.
  example::fill_operands<<<256, 256>>>(shard.data(), rows, rank * rows, /*k_shard=*/false, b, n, k,
                                       rank);
  IRIS_CUDA_CHECK(cudaDeviceSynchronize());
  // All of C with this rank's weights, from the same formulas.
  std::vector<float> want(std::size_t(m) * n, 0.0f);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      int sum = 0;
      for (int p = 0; p < k; ++p) sum += example::a_value(i, p) * example::b_value(rank, j, p);
      want[std::size_t(i) * n + j] = float(sum);
    }
  cudaStream_t stream;
  IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  bool all_right = true;
  for (auto pattern :
       {iris::ops::AllGatherPattern::kProducerConsumer, iris::ops::AllGatherPattern::kFusedMainloop,
        iris::ops::AllGatherPattern::kBulkSynchronous}) {
    const iris::ops::AllGatherGemmArguments args{
        .m = m, .n = n, .k = k, .a = shard.data(), .b = b, .c = c, .pattern = pattern};
    const std::string name(iris::ops::to_string(pattern));
    if (auto status = iris::ops::AllGatherGemm::can_implement(ctx, args); !status)
      return example::cannot_run(rank, name, status);
    iris::ops::AllGatherGemm op(ctx);
    op.initialize(args);
    for (int run = 0; run < 2; ++run) {
      IRIS_CUDA_CHECK(cudaMemsetAsync(c, 0, sizeof(*c) * m * n, stream));
      op.run(stream);
      IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
      all_right &= example::check_c(rank, name, example::to_host(c, std::size_t(m) * n), want,
                                    run == 0 ? "all of C is correct" : "and again on a second run");
    }
    ctx.barrier();
    example::print_time(
        rank, stream, [&](long) { op.run(stream); },
        example::text("M %d, N %d, K %d, %d ranks", m, n, k, world), "all-gather + GEMM", name);
    ctx.barrier();
  }
  cudaFree(b);
  cudaFree(c);
  return all_right ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return example::run_main(argc, argv, run);
}
