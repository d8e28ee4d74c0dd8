// GEMM and GEMM + all-scatter.
//
// One rank (no launcher, or -n 1): iris::ops::Gemm against cuBLAS (bf16 in and out, fp32
// accumulate) at 8192^3 and LLM tensor-parallel shapes, and the fused-sequential op (the GEMM
// with its communicating tile-store epilogue, all tiles staying on this GPU) against the plain
// GEMM: the cost of the epilogue alone. Then a second table at decode sizes (M = 1..128 tokens,
// N = 8192, K = 3584 = 28672 / 8 ranks and K = 28672): the configuration the shape rule picks,
// and the time of each configuration forced (swap-AB, small-M, large tile) and of cuBLAS
// (written to <json stem>_decode.json).
// Several ranks (iris-run -n N): each pattern of GEMM + all-scatter against the bulk-synchronous
// baseline of cuBLAS + an all-gather of the column blocks with device-API puts. With one GPU per
// rank and a build that has NCCL, also cuBLAS + NCCL: the GEMM of this rank's block, ncclAllGather
// (which leaves the blocks rank-major, W blocks of M x N / W), then one cudaMemcpy2DAsync per rank
// into the M x N column layout the fused op produces (cublas+nccl_ms, best_vs_nccl = its time /
// the fastest pattern's), and the same without the layout copy (cublas+nccl_no_layout_ms, a lower
// bound of that cost). NCCL refuses two ranks on one device, so where ranks share a GPU the table
// says it was skipped.
//
// With --tune out.json (several ranks), the workgroup-specialized pattern is also run with half
// and twice its default sending blocks, and rank 0 writes the fastest pattern and split per shape
// into the "gemm_all_scatter" section of the kAuto table, replacing that op's entries for this
// world size only (point IRIS_OPS_TUNING at the file; docs/ops.md). --shapes N runs the first N
// shapes only.
// Then, on one rank and on several, two tables of variants of the op on the same shapes, each
// timed in alternation with its reference in one run (paired samples): tracing's cost (the
// fused-sequential and workgroup-specialized ops with an iris::ops::Tracer against the same
// ops without, and the events one run records), and fp16 against bf16 for each communicating
// pattern. Their JSON goes next to --json's: <name>.trace.json and <name>.fp16.json.
// --decode (one rank) runs the decode table alone.
//
//   ./bench_gemm_all_scatter [--json gemm.json] [--samples 10] [--decode]
//   iris-run -n 4 ./bench_gemm_all_scatter --json gemm_all_scatter_n4.json [--tune t.json]
#include <cuda_fp16.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "iris/iris.hpp"
#include "iris/ops/detail/tuning.hpp"
#include "iris/ops/gemm.hpp"
#include "iris/ops/gemm_all_scatter.hpp"
#include "iris/ops/trace.hpp"
#include "ops_bench.hpp"

namespace {

using iris::bench::bf16;
using iris::bench::Paired;
using iris::bench::paired_ms;
using iris::bench::Shape;
using iris::bench::tflops;

/// The baseline's all-gather: every block of this rank's column block of C, row by row, to every
/// peer with device-API puts (a warp per row).
__global__ void all_gather_columns(const __grid_constant__ iris::device::Context ctx, bf16* c,
                                   int m, int n, std::int64_t ldc) {
  const int me = ctx.rank(), world = ctx.world_size();
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32;
  bf16* own = c + std::int64_t{me} * n;
  for (int row = blockIdx.x * warps + warp; row < m; row += gridDim.x * warps)
    for (int s = 1; s < world; ++s)
      iris::device::put(iris::warp{}, ctx, own + row * ldc, own + row * ldc, n, (me + s) % world);
}

void single_rank(iris::Context& ctx, const example::Repeats& repeats, const std::string& json) {
  const std::vector<Shape> shapes = {{8192, 8192, 8192},  {1024, 4096, 14336},
                                     {4096, 4096, 14336}, {16384, 4096, 14336},
                                     {4096, 8192, 28672}, {4096, 49152, 12288}};
  const cudaStream_t stream = iris::bench::nonblocking_stream();
  const iris::bench::CublasGemm cublas_gemm(stream);
  std::vector<iris::bench::Row> rows;
  for (const Shape& s : shapes) {
    bf16 *a, *b, *d;
    IRIS_CUDA_CHECK(cudaMalloc(&a, sizeof(bf16) * s.m * s.k));
    IRIS_CUDA_CHECK(cudaMalloc(&b, sizeof(bf16) * std::size_t(s.n) * s.k));
    IRIS_CUDA_CHECK(cudaMalloc(&d, sizeof(bf16) * std::size_t(s.m) * s.n));
    iris::bench::fill<<<1024, 256>>>(a, std::size_t(s.m) * s.k, 1);
    iris::bench::fill<<<1024, 256>>>(b, std::size_t(s.n) * s.k, 2);
    iris::ops::Gemm gemm;
    gemm.initialize({.m = s.m, .n = s.n, .k = s.k, .a = a, .b = b, .d = d});
    // The fused op on one rank: the tile-store epilogue, flags and the completion wait.
    auto c = ctx.empty<bf16>(iris::Shape(std::size_t(s.m) * s.n));
    iris::ops::GemmAllScatter fused(ctx);
    fused.initialize({.m = s.m,
                      .n = s.n,
                      .k = s.k,
                      .a = a,
                      .b = b,
                      .c = c.data(),
                      .pattern = iris::ops::AllScatterPattern::kFusedSequential});
    // Each against the GEMM in alternation: a long sweep of large GEMMs drifts in clock (power,
    // temperature), and only back-to-back pairs cancel that out of a ratio.
    const auto run_gemm = [&] { gemm.run(stream); };
    const Paired vs_cublas = paired_ms(
        ctx, stream, repeats, run_gemm, [&] { cublas_gemm(d, s.n, a, b, s.m, s.n, s.k); }, [] {});
    const Paired vs_fused =
        paired_ms(ctx, stream, repeats, [&] { fused.run(stream); }, run_gemm, [] {});
    const double ours = vs_cublas.first_ms, theirs = vs_cublas.second_ms;
    const double fused_ms = vs_fused.first_ms;
    iris::bench::Row row;
    row.number("M", s.m, "%.0f").number("N", s.n, "%.0f").number("K", s.k, "%.0f");
    row.number("iris_ms", ours).number("iris_TFLOPs", tflops(s.m, s.n, s.k, ours), "%.1f");
    row.number("cublas_ms", theirs).number("cublas_TFLOPs", tflops(s.m, s.n, s.k, theirs), "%.1f");
    row.number("iris_vs_cublas", vs_cublas.ratio);
    row.number("fused_1rank_ms", fused_ms).number("fused_vs_gemm", vs_fused.ratio);
    rows.push_back(row);
    IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
    cudaFree(a);
    cudaFree(b);
    cudaFree(d);
  }
  iris::bench::report(
      "gemm (bf16 -> bf16, fp32 accumulate), one rank", rows, json,
      "iris_vs_cublas = cuBLAS time / iris time; fused_vs_gemm = GEMM time / fused "
      "GEMM + all-scatter on one rank (tile-store epilogue, flags, completion wait); each ratio "
      "the median over adjacent pairs of the two timed in alternation, each time the median of "
      "its own samples");
}

/// iris::ops::Gemm at decode sizes: every configuration forced, the one the rule selects, and
/// cuBLAS. Memory-bound (B is N x K), so the table also gives the bytes moved per second (A, B
/// and D once each).
void decode_sizes(iris::Context& ctx, const example::Repeats& repeats, const std::string& json) {
  using iris::ops::GemmConfig;
  constexpr int kN = 8192;
  const cudaStream_t stream = iris::bench::nonblocking_stream();
  const iris::bench::CublasGemm cublas_gemm(stream);
  std::vector<iris::bench::Row> rows;
  for (const int k : {3584, 28672}) {
    for (const int m : {1, 8, 16, 32, 64, 128}) {
      bf16 *a, *b, *d;
      IRIS_CUDA_CHECK(cudaMalloc(&a, sizeof(bf16) * std::size_t(m) * k));
      IRIS_CUDA_CHECK(cudaMalloc(&b, sizeof(bf16) * std::size_t(kN) * k));
      IRIS_CUDA_CHECK(cudaMalloc(&d, sizeof(bf16) * std::size_t(m) * kN));
      iris::bench::fill<<<1024, 256>>>(a, std::size_t(m) * k, 1);
      iris::bench::fill<<<1024, 256>>>(b, std::size_t(kN) * k, 2);
      iris::ops::GemmArguments args{.m = m, .n = kN, .k = k, .a = a, .b = b, .d = d};
      const GemmConfig chosen = iris::ops::Gemm::select_config(args);
      // Each configuration forced, timed in alternation with cuBLAS (paired: X_vs_cublas is the
      // median over adjacent pairs); {time, cuBLAS time, cuBLAS / time}.
      const auto timed = [&](GemmConfig config) {
        iris::ops::GemmArguments forced = args;
        forced.config = config;
        iris::ops::Gemm gemm;
        gemm.initialize(forced, nullptr, stream);  // owns the workspace it needs
        const Paired p = paired_ms(
            ctx, stream, repeats, [&] { gemm.run(stream); },
            [&] { cublas_gemm(d, a, b, m, kN, k); }, [] {});
        return std::array<double, 3>{1e3 * p.first_ms, 1e3 * p.second_ms, p.ratio};
      };
      const auto swap_ab = timed(GemmConfig::kSwapAB);
      const auto small_m = timed(GemmConfig::kSmallM);
      const auto large = timed(GemmConfig::kLargeTile);
      const auto& ours = chosen == GemmConfig::kSwapAB   ? swap_ab
                         : chosen == GemmConfig::kSmallM ? small_m
                                                         : large;
      const double theirs = ours[1];
      const double bytes = 2.0 * (double(kN) * k + double(m) * k + double(m) * kN);
      iris::bench::Row row;
      row.number("M", m, "%.0f").number("N", kN, "%.0f").number("K", k, "%.0f");
      row.text("config", std::string(iris::ops::to_string(chosen)));
      row.number("iris_us", ours[0], "%.1f")
          .number("iris_GBps", example::gb_per_s(bytes, ours[0] * 1e-3), "%.0f");
      row.number("swap_ab_us", swap_ab[0], "%.1f")
          .number("swap_ab_GBps", example::gb_per_s(bytes, swap_ab[0] * 1e-3), "%.0f");
      row.number("small_m_us", small_m[0], "%.1f").number("large_tile_us", large[0], "%.1f");
      row.number("cublas_us", theirs, "%.1f")
          .number("cublas_GBps", example::gb_per_s(bytes, theirs * 1e-3), "%.0f");
      row.number("iris_vs_cublas", ours[2])
          .number("swap_ab_vs_cublas", swap_ab[2])
          .number("small_m_vs_cublas", small_m[2])
          .number("swap_ab_vs_small_m", small_m[0] / swap_ab[0])
          .number("iris_vs_large_tile", large[0] / ours[0]);
      rows.push_back(row);
      IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
      cudaFree(a);
      cudaFree(b);
      cudaFree(d);
    }
  }
  const std::string path =
      json.empty()
          ? json
          : json.substr(0, json.size() - (json.ends_with(".json") ? 5 : 0)) + "_decode.json";
  iris::bench::report(
      "gemm at decode sizes (bf16 -> bf16), one rank", rows, path,
      "config = the configuration the shape rule selects (docs/ops.md), iris_us its time; "
      "swap_ab_us, small_m_us, large_tile_us = each configuration forced, timed in alternation "
      "with cuBLAS (cublas_us: the samples paired with the selected one); X_vs_cublas = median "
      "over adjacent pairs of cuBLAS time / X time; swap_ab_vs_small_m = small-M time / swap-AB "
      "time; iris_vs_large_tile = large-tile time / iris time (medians, not paired); GBps = (A + "
      "B + D bytes) / time");
}

void several_ranks(iris::Context& ctx, const example::Repeats& repeats, const std::string& json,
                   const std::string& tune, int shape_count) {
  const int world = ctx.world_size(), me = ctx.rank();
  // (M, N of all ranks together, K)
  std::vector<Shape> shapes = {
      {1024, 4096, 14336}, {4096, 4096, 14336}, {1024, 8192, 28672}, {4096, 8192, 28672}};
  if (shape_count > 0 && shape_count < static_cast<int>(shapes.size())) shapes.resize(shape_count);
  std::vector<iris::ops::detail::TuningEntry> tuned;
  iris::bench::OpsBench bench(ctx, repeats);
  const cudaStream_t stream = bench.stream();
  const auto devices = iris::bench::device_of_each_rank(ctx.bootstrap());
  int sharing = 0;
  for (int r = 0; r < world; ++r) sharing += devices[r] == devices[me];
  const int default_senders = std::max(2, (16 / std::max(1, sharing) + 1) / 2 * 2);
  std::vector<iris::bench::Row> rows;
  for (const Shape& s : shapes) {
    const int n = s.n / world;
    bf16 *a, *b;
    IRIS_CUDA_CHECK(cudaMalloc(&a, sizeof(bf16) * s.m * s.k));
    IRIS_CUDA_CHECK(cudaMalloc(&b, sizeof(bf16) * std::size_t(n) * s.k));
    iris::bench::fill<<<1024, 256>>>(a, std::size_t(s.m) * s.k, 1);
    iris::bench::fill<<<1024, 256>>>(b, std::size_t(n) * s.k, 2 + me);
    auto c = ctx.zeros<bf16>(iris::Shape(std::size_t(s.m) * s.n));
    const double gemm_only = bench.time_ms(
        [&](long) { bench.cublas_gemm(c.data() + std::int64_t{me} * n, s.n, a, b, s.m, n, s.k); });
    const double baseline = bench.time_ms([&](long) {
      bench.cublas_gemm(c.data() + std::int64_t{me} * n, s.n, a, b, s.m, n, s.k);
      all_gather_columns<<<2 * example::sm_count(), 256, 0, stream>>>(ctx.device(), c.data(), s.m,
                                                                      n, s.n);
      ctx.device_barrier(stream);
    });
    iris::bench::Row row = bench.shape_row(s.m, s.n, s.k);
    row.number("cublas_gemm_ms", gemm_only);
    row.number("cublas+all_gather_ms", baseline);
    struct Variant {
      iris::ops::AllScatterPattern pattern;
      int comm_blocks;
    };
    std::vector<Variant> variants = {{iris::ops::AllScatterPattern::kBulkSynchronous, 0},
                                     {iris::ops::AllScatterPattern::kFusedSequential, 0},
                                     {iris::ops::AllScatterPattern::kProducerConsumer, 0},
                                     {iris::ops::AllScatterPattern::kWorkgroupSpecialized, 0}};
    // --tune: also half and twice the op's default senders (16 per GPU, divided among the
    // ranks sharing it, in whole 2-block clusters), so that the GEMM keeps most of its share.
    if (!tune.empty())
      for (int blocks : {std::max(2, default_senders / 4 * 2), 2 * default_senders})
        if (blocks != default_senders)
          variants.push_back({iris::ops::AllScatterPattern::kWorkgroupSpecialized, blocks});
    iris::ops::detail::TuningEntry best{world, s.m, s.n, s.k};
    double best_ms = 0;
    for (const Variant& v : variants) {
      iris::ops::GemmAllScatter op(ctx);
      op.initialize({.m = s.m,
                     .n = n,
                     .k = s.k,
                     .a = a,
                     .b = b,
                     .c = c.data(),
                     .pattern = v.pattern,
                     .comm_blocks = v.comm_blocks});
      const double ms = bench.time_ms([&](long) { op.run(stream); });
      std::string name(iris::ops::to_string(v.pattern));
      if (v.comm_blocks) name += "_c" + std::to_string(v.comm_blocks);
      iris::bench::pattern_columns(row, name, ms, baseline);
      if (best_ms == 0 || ms < best_ms) {
        best_ms = ms;
        best.pattern = v.pattern;
        best.comm_blocks = v.comm_blocks;
      }
    }
    row.text(
        "fastest",
        std::string(iris::ops::to_string(std::get<iris::ops::AllScatterPattern>(best.pattern))) +
            (best.comm_blocks ? " c" + std::to_string(best.comm_blocks) : std::string()));
    tuned.push_back(best);
    if (bench.nccl().available()) {
      bf16 *block, *blocks, *columns;
      IRIS_CUDA_CHECK(cudaMalloc(&block, sizeof(bf16) * std::size_t(s.m) * n));
      IRIS_CUDA_CHECK(cudaMalloc(&blocks, sizeof(bf16) * std::size_t(s.m) * s.n));
      IRIS_CUDA_CHECK(cudaMalloc(&columns, sizeof(bf16) * std::size_t(s.m) * s.n));
      const auto gemm_and_gather = [&] {
        bench.cublas_gemm(block, a, b, s.m, n, s.k);
        bench.nccl().all_gather(block, blocks, sizeof(bf16) * std::size_t(s.m) * n, stream);
      };
      // NCCL's output is rank-major (block r: M x N / W, row-major); the fused op's C is M x N
      // with rank r's columns at r * N / W: one strided copy per rank puts them there.
      const auto to_columns = [&] {
        for (int r = 0; r < world; ++r)
          IRIS_CUDA_CHECK(cudaMemcpy2DAsync(
              columns + std::int64_t{r} * n, sizeof(bf16) * s.n, blocks + std::int64_t{r} * s.m * n,
              sizeof(bf16) * n, sizeof(bf16) * n, s.m, cudaMemcpyDeviceToDevice, stream));
      };
      bench.nccl_columns(row, best_ms, [&](long) {
        gemm_and_gather();
        to_columns();
      });
      row.number("cublas+nccl_no_layout_ms", bench.time_ms([&](long) { gemm_and_gather(); }));
      cudaFree(block);
      cudaFree(blocks);
      cudaFree(columns);
    } else {
      bench.nccl_columns(row, best_ms, [](long) {});
    }
    rows.push_back(row);
    ctx.barrier();
    cudaFree(a);
    cudaFree(b);
  }
  bench.report("gemm + all-scatter (bf16), " + std::to_string(world) + " ranks", rows, json,
               "speedup = (cuBLAS + device-API all-gather) time / pattern time; "
               "cublas+nccl_ms = cuBLAS GEMM + ncclAllGather + the copy from NCCL's rank-major "
               "blocks into the M x N column layout the op produces (best_vs_nccl is against "
               "it); cublas+nccl_no_layout_ms skips that copy, a lower bound; "
               "times are the slowest rank's median");
  iris::bench::write_tuning(ctx, tune, iris::ops::AllScatterPattern{}, tuned);
}

/// to[i] = from[i] in fp16 (the fill's values, multiples of 1/8 in [-1, 1], are exact in both).
__global__ void to_fp16(const bf16* from, __half* to, std::size_t count) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count;
       i += std::size_t{gridDim.x} * blockDim.x)
    to[i] = __float2half(__bfloat162float(from[i]));
}

/// `json` with `.<part>` before its .json ("" stays "").
std::string json_beside(const std::string& json, const std::string& part) {
  if (json.empty()) return json;
  const std::string ext = ".json";
  const bool has_ext = json.size() > ext.size() && json.rfind(ext) == json.size() - ext.size();
  return (has_ext ? json.substr(0, json.size() - ext.size()) : json) + "." + part + ext;
}

/// Tracing's cost and fp16 against bf16, on `shapes` (N: all ranks' columns together): the two
/// tables after the main one.
void variant_tables(iris::Context& ctx, const example::Repeats& repeats,
                    const std::vector<Shape>& shapes, const std::string& json) {
  using iris::ops::AllScatterPattern;
  const int world = ctx.world_size(), me = ctx.rank();
  const cudaStream_t stream = iris::bench::nonblocking_stream();
  // Every communicating pattern in fp16; on one rank only fused-sequential and
  // workgroup-specialized, whose epilogue and senders still run there (the other two reduce to
  // their GEMM).
  std::vector<AllScatterPattern> fp16_patterns = {AllScatterPattern::kFusedSequential,
                                                  AllScatterPattern::kWorkgroupSpecialized};
  if (world > 1)
    fp16_patterns = {AllScatterPattern::kBulkSynchronous, AllScatterPattern::kFusedSequential,
                     AllScatterPattern::kProducerConsumer,
                     AllScatterPattern::kWorkgroupSpecialized};
  std::vector<iris::bench::Row> tracing_rows, fp16_rows;
  std::size_t dropped = 0;
  for (const Shape& s : shapes) {
    const int n = s.n / world;
    const std::size_t a_count = std::size_t(s.m) * s.k, b_count = std::size_t(n) * s.k;
    bf16 *a, *b;
    __half *a16, *b16;
    IRIS_CUDA_CHECK(cudaMalloc(&a, sizeof(bf16) * a_count));
    IRIS_CUDA_CHECK(cudaMalloc(&b, sizeof(bf16) * b_count));
    IRIS_CUDA_CHECK(cudaMalloc(&a16, sizeof(__half) * a_count));
    IRIS_CUDA_CHECK(cudaMalloc(&b16, sizeof(__half) * b_count));
    iris::bench::fill<<<1024, 256>>>(a, a_count, 1);
    iris::bench::fill<<<1024, 256>>>(b, b_count, 2 + me);
    to_fp16<<<1024, 256>>>(a, a16, a_count);
    to_fp16<<<1024, 256>>>(b, b16, b_count);
    // One symmetric C for both types (2-byte elements either way).
    auto c = ctx.zeros<bf16>(iris::Shape(std::size_t(s.m) * s.n));
    const auto args = [&](AllScatterPattern pattern, iris::ops::DType type,
                          iris::ops::Tracer* trace) {
      const bool fp16 = type == iris::ops::DType::kF16;
      return iris::ops::GemmAllScatterArguments{.m = s.m,
                                                .n = n,
                                                .k = s.k,
                                                .type = type,
                                                .a = fp16 ? static_cast<const void*>(a16) : a,
                                                .b = fp16 ? static_cast<const void*>(b16) : b,
                                                .c = c.data(),
                                                .pattern = pattern,
                                                .trace = trace};
    };
    const auto run = [stream](iris::ops::GemmAllScatter& op) {
      return [&op, stream] { op.run(stream); };
    };
    const auto shape_row = [&](AllScatterPattern pattern) {
      iris::bench::Row row;
      row.number("ranks", world, "%.0f").number("M", s.m, "%.0f").number("N", s.n, "%.0f");
      row.number("K", s.k, "%.0f").text("pattern", std::string(iris::ops::to_string(pattern)));
      return row;
    };
    // Tracing: the same op with and without a tracer; the tracer is cleared before each sample
    // (untimed), so that no run overflows it and every traced run records all of its events.
    for (const auto pattern :
         {AllScatterPattern::kFusedSequential, AllScatterPattern::kWorkgroupSpecialized}) {
      iris::ops::Tracer tracer;
      iris::ops::GemmAllScatter untraced(ctx), traced(ctx);
      untraced.initialize(args(pattern, iris::ops::DType::kBF16, nullptr));
      traced.initialize(args(pattern, iris::ops::DType::kBF16, &tracer));
      const Paired t = paired_ms(ctx, stream, repeats, run(untraced), run(traced),
                                 [&] { tracer.clear(stream); });
      // The noise floor: the untraced op against itself, paired the same way.
      const Paired same = paired_ms(ctx, stream, repeats, run(untraced), run(untraced), [] {});
      tracer.clear(stream);
      traced.run(stream);
      IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
      const std::vector<iris::ops::TraceEvent> recorded = tracer.events();
      const std::size_t events = recorded.size();
      // Per tile on rank 0: the median span of the mainloop (gemm_tile) and of the epilogue's
      // stores (store), what the fused op spends sending each tile and what it computes for.
      const auto median_us = [&](iris::ops::TraceKind kind) {
        std::vector<double> spans;
        for (const auto& e : recorded)
          if (e.kind == kind) spans.push_back(1e-3 * static_cast<double>(e.end_ns - e.start_ns));
        return spans.empty() ? 0.0 : example::summarize(spans).median;
      };
      dropped += tracer.dropped();
      const int tiles = traced.tiles_per_block();
      iris::bench::Row row = shape_row(pattern);
      row.number("tiles", tiles, "%.0f");
      row.number("untraced_ms", t.first_ms).number("traced_ms", t.second_ms);
      row.number("trace_cost", t.ratio - 1, "%+.4f");
      row.number("pair_spread", same.spread, "%.4f");
      row.number("tile_us", median_us(iris::ops::TraceKind::kGemmTile), "%.2f");
      row.number("store_us", median_us(iris::ops::TraceKind::kStore), "%.2f");
      row.number("events", static_cast<double>(events), "%.0f");
      row.number("events_per_tile", static_cast<double>(events) / tiles, "%.1f");
      tracing_rows.push_back(row);
    }
    for (const auto pattern : fp16_patterns) {
      iris::ops::GemmAllScatter bf16_op(ctx), fp16_op(ctx);
      bf16_op.initialize(args(pattern, iris::ops::DType::kBF16, nullptr));
      fp16_op.initialize(args(pattern, iris::ops::DType::kF16, nullptr));
      const Paired t = paired_ms(ctx, stream, repeats, run(bf16_op), run(fp16_op), [] {});
      iris::bench::Row row = shape_row(pattern);
      row.number("bf16_ms", t.first_ms).number("fp16_ms", t.second_ms);
      row.number("fp16_vs_bf16", t.ratio);
      fp16_rows.push_back(row);
    }
    IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
    ctx.barrier();
    cudaFree(a);
    cudaFree(b);
    cudaFree(a16);
    cudaFree(b16);
  }
  IRIS_CUDA_CHECK(cudaStreamDestroy(stream));
  if (me != 0) return;
  const std::string ranks = std::to_string(world) + (world == 1 ? " rank" : " ranks");
  iris::bench::report(
      "gemm + all-scatter (bf16): tracing's cost, " + ranks, tracing_rows,
      json_beside(json, "trace"),
      "untraced_ms, traced_ms: the op without and with an iris::ops::Tracer, timed in "
      "alternation (the slowest rank's median); trace_cost = median over adjacent pairs of "
      "traced / untraced - 1 (the largest rank's); pair_spread = median over adjacent pairs of "
      "|untraced / untraced - 1|, the untraced op against itself (its noise floor); tile_us, "
      "store_us: the median span per tile, on rank 0, of the mainloop (gemm_tile event) and of "
      "the epilogue's stores (store event); events: what one traced run records on rank 0" +
          std::string(dropped ? "; the tracer DROPPED events, so the cost is understated" : ""));
  iris::bench::report("gemm + all-scatter: fp16 against bf16, " + ranks, fp16_rows,
                      json_beside(json, "fp16"),
                      "bf16_ms, fp16_ms: the same pattern in each type, timed in alternation "
                      "(the slowest rank's median); fp16_vs_bf16 = median over adjacent pairs of "
                      "fp16 time / bf16 time (the largest rank's)");
}

}  // namespace

int main(int argc, char** argv) {
  if (!example::gpu_visible("bench_gemm_all_scatter")) return 0;
  iris::ContextOptions options;
  options.heap_size = std::size_t{1} << 30;
  auto ctx = iris::Context::from_env(options);
  const example::Repeats repeats = iris::bench::ops_repeats(argc, argv);
  const std::string json = iris::bench::json_path_from_args(argc, argv);
  const int shape_count = static_cast<int>(example::number_arg(argc, argv, "--shapes", 0));
  std::vector<Shape> variant_shapes;
  if (ctx.world_size() == 1) {
    if (iris::bench::has_flag(argc, argv, "--decode")) {
      decode_sizes(ctx, repeats, json);
      return 0;
    }
    single_rank(ctx, repeats, json);
    decode_sizes(ctx, repeats, json);
    variant_shapes = {{1024, 4096, 14336}, {4096, 4096, 14336}, {8192, 8192, 8192}};
  } else {
    const char* tune = example::string_arg(argc, argv, "--tune");
    several_ranks(ctx, repeats, json, tune != nullptr ? tune : "", shape_count);
    variant_shapes = {{1024, 4096, 14336}, {4096, 8192, 28672}};
  }
  if (shape_count > 0 && shape_count < static_cast<int>(variant_shapes.size()))
    variant_shapes.resize(shape_count);
  variant_tables(ctx, repeats, variant_shapes, json);
  return 0;
}
