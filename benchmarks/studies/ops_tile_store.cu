// Study: what the tile-store epilogue (the fused-sequential GEMM + all-scatter's) costs on one
// rank, and which part of it. Not run by the check script: rerun when the epilogue changes.
//
//   iris-run -n 1 ./study_ops_tile_store [--samples 15]
//
// Per shape, each variant timed in alternation with the plain GEMM (CUTLASS's TMA epilogue, the
// same mainloop and tile), as the median over adjacent pairs of plain / variant:
//   tile_store_flags: the tile-store GEMM as GemmAllScatter's fused-sequential pattern runs it on
//     one rank: every tile stored through the shared-memory passes, then its flag raised with a
//     release (the per-tile completion signal);
//   tile_store_no_flags: the same kernel with no flags, so the difference between the two is the
//     per-tile release alone.
#include <cstdio>
#include <vector>

#include "iris/iris.hpp"
#include "iris/ops/detail/gemm_runner.hpp"
#include "ops_bench.hpp"

namespace {

using iris::bench::bf16;
using iris::bench::Shape;

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (!example::gpu_visible("study_ops_tile_store")) return 0;
  try {
    iris::ContextOptions options;
    options.heap_size = std::size_t{1} << 30;
    auto ctx = iris::Context::from_env(options);
    if (ctx.world_size() != 1) {
      std::fprintf(stderr, "study_ops_tile_store: run it on one rank (iris-run -n 1)\n");
      return 1;
    }
    const example::Repeats repeats = iris::bench::ops_repeats(argc, argv);
    const std::vector<Shape> shapes = {
        {8192, 8192, 8192}, {1024, 4096, 14336}, {4096, 4096, 14336}, {4096, 49152, 12288}};
    const cudaStream_t stream = iris::bench::nonblocking_stream();
    std::vector<iris::bench::Row> rows;
    for (const Shape& s : shapes) {
      std::printf("[study_ops_tile_store] %d x %d x %d\n", s.m, s.n, s.k);
      bf16 *a, *b;
      IRIS_CUDA_CHECK(cudaMalloc(&a, sizeof(bf16) * s.m * s.k));
      IRIS_CUDA_CHECK(cudaMalloc(&b, sizeof(bf16) * std::size_t(s.n) * s.k));
      iris::bench::fill<<<1024, 256>>>(a, std::size_t(s.m) * s.k, 1);
      iris::bench::fill<<<1024, 256>>>(b, std::size_t(s.n) * s.k, 2);
      auto d = ctx.empty<bf16>(iris::Shape(std::size_t(s.m) * s.n));
      auto flags = ctx.zeros<std::uint64_t>(iris::Shape(std::size_t(s.m) * s.n / (128 * 256) + 1));
      const iris::ops::GemmArguments args{
          .m = s.m, .n = s.n, .k = s.k, .a = a, .b = b, .d = d.data()};
      iris::ops::Gemm plain;
      plain.initialize(args);
      const iris::team self{0, 1, 1};
      auto with_flags = iris::ops::detail::make_tile_store_gemm_bf16();
      auto no_flags = iris::ops::detail::make_tile_store_gemm_bf16();
      const iris::ops::detail::TileStore flagged{ctx.device(), self, flags.data(), 0, 0};
      const iris::ops::detail::TileStore unflagged{ctx.device(), self, nullptr, 0, 0};
      with_flags->initialize(args, &flagged, nullptr, stream);
      no_flags->initialize(args, &unflagged, nullptr, stream);
      const auto run_plain = [&] { plain.run(stream); };
      // ratio: plain time / variant time, the median over adjacent pairs.
      const double flagged_ratio =
          iris::bench::paired_ms(
              ctx, stream, repeats, [&] { with_flags->run(stream); }, run_plain, [] {})
              .ratio;
      const double unflagged_ratio =
          iris::bench::paired_ms(
              ctx, stream, repeats, [&] { no_flags->run(stream); }, run_plain, [] {})
              .ratio;
      iris::bench::Row row;
      row.number("M", s.m, "%.0f").number("N", s.n, "%.0f").number("K", s.k, "%.0f");
      row.number("tile_store_flags", flagged_ratio).number("tile_store_no_flags", unflagged_ratio);
      rows.push_back(row);
      IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
      cudaFree(a);
      cudaFree(b);
    }
    iris::bench::report("tile-store epilogue on one rank, against the plain GEMM", rows,
                        iris::bench::json_path_from_args(argc, argv),
                        "each column: median over adjacent pairs of plain GEMM time / variant "
                        "time, the two timed in alternation (1.0: as fast as the plain GEMM)");
    return 0;
  } catch (const iris::Error& error) {
    std::fprintf(stderr, "study_ops_tile_store: %s\n", error.what());
    return 1;
  }
}
