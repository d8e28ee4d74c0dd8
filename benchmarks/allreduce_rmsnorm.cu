// all-reduce + residual add + RMSNorm at decode sizes (tokens 1, 8, 32, 128; hidden 4096, 8192;
// bf16): iris::ops::AllReduceRmsNorm fused, the same op bulk-synchronous (iris::ccl all_reduce,
// then a norm kernel), and iris::ccl all_reduce alone (its own choice of algorithm), each timed
// as a CUDA graph of 20 calls (median over samples, slowest rank), so that launch overhead is
// what a decode step's graph pays. Before timing, the fused and bulk-synchronous results are
// compared: the inputs are multiples of 1/8 whose sums bf16 holds exactly, so both patterns
// must give the same bits ("wrong" counts the elements that differ, on the worst rank).
// fused_fp8_us: the fused pattern with y in fp8 e4m3 (y_scale 1/64); its bytes are compared
// with the bulk-synchronous pattern's fp8 y as well (counted in "wrong").
//
//   iris-run -n 8 ./bench_allreduce_rmsnorm [--samples 15] [--json out.json]
//
// Before timing, iris::ccl's all_reduce and (where it runs) NCCL's are each called once eagerly
// and their sums compared with the exact sum of the ranks' x (all_reduce_wrong, nccl_wrong:
// elements that differ, on the worst rank); NCCL's first call is thus never inside a graph's
// capture. Any wrong count above 0 prints "WRONG:" and the program exits 1 after its table.
//
// NCCL, with one GPU per rank and a build that has it: NCCL's all_reduce alone, timed the same
// way (nccl_all_reduce_us, and fused_vs_nccl = its time / the fused op's). NCCL refuses two
// ranks on one GPU, so with ranks sharing a GPU the table says it was skipped.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "iris/ccl.hpp"
#include "iris/iris.hpp"
#include "iris/ops/allreduce_rmsnorm.hpp"
#include "nccl_baseline.hpp"
#include "report.hpp"

namespace {

using iris::ops::AllReduceNormPattern;

__global__ void fill_inputs(__nv_bfloat16* x, __nv_bfloat16* residual, __nv_bfloat16* gamma,
                            int tokens, int hidden, int rank) {
  const std::size_t n = std::size_t(tokens) * hidden;
  for (std::size_t k = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; k < n;
       k += std::size_t{gridDim.x} * blockDim.x) {
    const int t = static_cast<int>(k / hidden), i = static_cast<int>(k % hidden);
    x[k] = __float2bfloat16_rn(static_cast<float>((t + i + rank) % 5 - 2) / 4);
    residual[k] = __float2bfloat16_rn(static_cast<float>((3 * t + i) % 7 - 3) / 8);
    if (t == 0) gamma[i] = __float2bfloat16_rn(1.0f + static_cast<float>(i % 4) / 8);
  }
}

/// Counts into `*wrong` the elements of `sum` (tokens x hidden) that differ from the sum over
/// `world` ranks of fill_inputs' x: multiples of 1/4 whose sums bf16 holds exactly.
__global__ void count_wrong_sums(const __nv_bfloat16* sum, int tokens, int hidden, int world,
                                 unsigned long long* wrong) {
  const std::size_t n = std::size_t(tokens) * hidden;
  unsigned long long mine = 0;
  for (std::size_t k = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; k < n;
       k += std::size_t{gridDim.x} * blockDim.x) {
    const int t = static_cast<int>(k / hidden), i = static_cast<int>(k % hidden);
    float want = 0;
    for (int r = 0; r < world; ++r) want += static_cast<float>((t + i + r) % 5 - 2) / 4;
    mine += __bfloat162float(sum[k]) != want;
  }
  if (mine) atomicAdd(wrong, mine);
}

__global__ void count_different(const unsigned short* a, const unsigned short* b, std::size_t n,
                                unsigned long long* wrong) {
  unsigned long long mine = 0;
  for (std::size_t k = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; k < n;
       k += std::size_t{gridDim.x} * blockDim.x)
    mine += a[k] != b[k];
  if (mine) atomicAdd(wrong, mine);
}

}  // namespace

int main(int argc, char** argv) {
  if (!example::gpu_visible("allreduce_rmsnorm")) return 0;
  const int samples = static_cast<int>(example::number_arg(argc, argv, "--samples", 15));
  const std::string json = iris::bench::json_path_from_args(argc, argv);
  try {
    iris::ContextOptions options;
    options.heap_size = std::size_t{256} << 20;
    iris::Context ctx = iris::Context::from_env(options);
    iris::ccl::Communicator comm(ctx);
    const int world = ctx.world_size();
    const iris::bench::NcclBaseline nccl(ctx);
    const std::string note = std::to_string(world) + " ranks; " + nccl.note();

    constexpr int kMaxTokens = 128, kMaxHidden = 8192, kCalls = 20;
    const std::size_t max_n = std::size_t(kMaxTokens) * kMaxHidden;
    auto x = ctx.zeros<__nv_bfloat16>(iris::Shape(max_n));
    auto sum = ctx.zeros<__nv_bfloat16>(iris::Shape(max_n));  // ccl all_reduce alone
    __nv_bfloat16 *residual, *gamma, *out[2], *y[2], *nccl_sum;
    unsigned char* y8[2];  // fp8 y of the fused and the bulk-synchronous pattern
    unsigned long long* wrong;
    IRIS_CUDA_CHECK(cudaMalloc(&residual, max_n * sizeof(__nv_bfloat16)));
    IRIS_CUDA_CHECK(cudaMalloc(&gamma, kMaxHidden * sizeof(__nv_bfloat16)));
    for (int p = 0; p < 2; ++p) {
      IRIS_CUDA_CHECK(cudaMalloc(&out[p], max_n * sizeof(__nv_bfloat16)));
      IRIS_CUDA_CHECK(cudaMalloc(&y[p], max_n * sizeof(__nv_bfloat16)));
      IRIS_CUDA_CHECK(cudaMalloc(&y8[p], max_n));
    }
    IRIS_CUDA_CHECK(cudaMalloc(&nccl_sum, max_n * sizeof(__nv_bfloat16)));
    IRIS_CUDA_CHECK(cudaMalloc(&wrong, sizeof(unsigned long long)));
    cudaStream_t stream;
    IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    // Median microseconds per call of `enqueue`, as a graph of kCalls calls, slowest rank.
    auto time_us = [&](auto&& enqueue) {
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      IRIS_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < kCalls; ++i) enqueue();
      IRIS_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
      IRIS_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      example::Repeats repeats;
      repeats.warmup = 2;
      repeats.samples = samples;
      const double ms =
          example::summarize(example::time_calls_ms(
                                 stream, repeats,
                                 [&](long) { IRIS_CUDA_CHECK(cudaGraphLaunch(exec, stream)); },
                                 [&] { comm.barrier(stream); }))
              .median /
          kCalls;
      IRIS_CUDA_CHECK(cudaGraphExecDestroy(exec));
      IRIS_CUDA_CHECK(cudaGraphDestroy(graph));
      return iris::bench::slowest_rank(ctx.bootstrap(), ms * 1e3);
    };

    // Wrong elements of `result` (the all-reduced x of `tokens` x `hidden`), the worst rank's.
    auto wrong_sums = [&](const __nv_bfloat16* result, int tokens, int hidden) {
      IRIS_CUDA_CHECK(cudaMemsetAsync(wrong, 0, sizeof(unsigned long long), stream));
      count_wrong_sums<<<128, 256, 0, stream>>>(result, tokens, hidden, world, wrong);
      IRIS_CUDA_CHECK(cudaGetLastError());
      unsigned long long host = 0;
      IRIS_CUDA_CHECK(cudaMemcpyAsync(&host, wrong, sizeof(host), cudaMemcpyDeviceToHost, stream));
      IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
      return iris::bench::slowest_rank(ctx.bootstrap(), static_cast<double>(host));
    };

    std::vector<iris::bench::Row> rows;
    std::vector<std::string> wrong_rows;  // what was wrong, for the WRONG: lines
    for (int hidden : {4096, 8192}) {
      for (int tokens : {1, 8, 32, 128}) {
        const std::size_t n = std::size_t(tokens) * hidden;
        fill_inputs<<<256, 256, 0, stream>>>(x.data(), residual, gamma, tokens, hidden, ctx.rank());
        IRIS_CUDA_CHECK(cudaGetLastError());
        IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
        ctx.barrier();
        const AllReduceNormPattern patterns[2] = {AllReduceNormPattern::kFused,
                                                  AllReduceNormPattern::kBulkSynchronous};
        // Pattern p writes out[p] and y[p] (bf16) or y8[p] (fp8), and runs once.
        const auto set_up = [&](iris::ops::AllReduceRmsNorm& op, int p, bool fp8) {
          op.initialize(
              {.tokens = tokens,
               .hidden = hidden,
               .x = x.data(),
               .residual = residual,
               .gamma = gamma,
               .residual_out = out[p],
               .y = fp8 ? static_cast<void*>(y8[p]) : static_cast<void*>(y[p]),
               .y_type = fp8 ? iris::ops::NormOutput::kFp8E4M3 : iris::ops::NormOutput::kInput,
               .y_scale = fp8 ? 1.f / 64 : 1.f,
               .pattern = patterns[p]});
          op.run(stream);
        };
        iris::ops::AllReduceRmsNorm ops[2] = {iris::ops::AllReduceRmsNorm(ctx),
                                              iris::ops::AllReduceRmsNorm(ctx)};
        for (int p = 0; p < 2; ++p) set_up(ops[p], p, false);
        iris::ops::AllReduceRmsNorm ops8[2] = {iris::ops::AllReduceRmsNorm(ctx),
                                               iris::ops::AllReduceRmsNorm(ctx)};
        for (int p = 0; p < 2; ++p) set_up(ops8[p], p, true);
        IRIS_CUDA_CHECK(cudaMemsetAsync(wrong, 0, sizeof(unsigned long long), stream));
        for (int p = 0; p < 2; ++p) {
          const auto* a = reinterpret_cast<const unsigned short*>(p == 0 ? out[0] : y[0]);
          const auto* b = reinterpret_cast<const unsigned short*>(p == 0 ? out[1] : y[1]);
          count_different<<<128, 256, 0, stream>>>(a, b, n, wrong);
        }
        // fp8 y: n bytes, compared as n / 2 pairs
        count_different<<<128, 256, 0, stream>>>(reinterpret_cast<const unsigned short*>(y8[0]),
                                                 reinterpret_cast<const unsigned short*>(y8[1]),
                                                 n / 2, wrong);
        unsigned long long host_wrong = 0;
        IRIS_CUDA_CHECK(cudaMemcpyAsync(&host_wrong, wrong, sizeof(host_wrong),
                                        cudaMemcpyDeviceToHost, stream));
        IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
        ctx.check_device_errors();
        host_wrong = static_cast<unsigned long long>(
            iris::bench::slowest_rank(ctx.bootstrap(), static_cast<double>(host_wrong)));

        // One eager call of each all_reduce, checked, before any is captured into a graph.
        // (each destination poisoned and the poison landed before any rank may write into it)
        IRIS_CUDA_CHECK(cudaMemsetAsync(sum.data(), 0xff, n * sizeof(__nv_bfloat16), stream));
        IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
        ctx.barrier();
        comm.all_reduce(sum.data(), x.data(), n, iris::ccl::ReduceOp::kSum, stream);
        const double ccl_wrong = wrong_sums(sum.data(), tokens, hidden);
        double nccl_wrong = 0;
        if (nccl.available()) {
          IRIS_CUDA_CHECK(cudaMemsetAsync(nccl_sum, 0xff, n * sizeof(__nv_bfloat16), stream));
          IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
          ctx.barrier();
          nccl.all_reduce(x.data(), nccl_sum, n, stream);
          nccl_wrong = wrong_sums(nccl_sum, tokens, hidden);
        }
        const std::string shape =
            "tokens " + std::to_string(tokens) + ", hidden " + std::to_string(hidden);
        if (host_wrong != 0)
          wrong_rows.push_back(shape + ": fused and bulk-synchronous differ in " +
                               std::to_string(host_wrong) + " elements");
        if (ccl_wrong != 0)
          wrong_rows.push_back(shape + ": iris::ccl all_reduce wrong in " +
                               std::to_string(static_cast<long long>(ccl_wrong)) + " elements");
        if (nccl_wrong != 0)
          wrong_rows.push_back(shape + ": NCCL all_reduce wrong in " +
                               std::to_string(static_cast<long long>(nccl_wrong)) + " elements");

        const double fused = time_us([&] { ops[0].run(stream); });
        const double bulk = time_us([&] { ops[1].run(stream); });
        const double fused8 = time_us([&] { ops8[0].run(stream); });
        const double alone = time_us(
            [&] { comm.all_reduce(sum.data(), x.data(), n, iris::ccl::ReduceOp::kSum, stream); });
        iris::bench::Row row;
        row.number("tokens", tokens, "%.0f")
            .number("hidden", hidden, "%.0f")
            .number("bytes", static_cast<double>(n * sizeof(__nv_bfloat16)), "%.0f")
            .number("fused_us", fused, "%.2f")
            .number("bulk_sync_us", bulk, "%.2f")
            .number("fused_fp8_us", fused8, "%.2f")
            .number("all_reduce_us", alone, "%.2f")
            .number("fused_vs_bulk", bulk / fused, "%.2f")
            .number("fused_vs_all_reduce", alone / fused, "%.2f")
            .number("fused_blocks", ops[0].blocks(), "%.0f")
            .number("wrong", static_cast<double>(host_wrong), "%.0f")
            .number("all_reduce_wrong", ccl_wrong, "%.0f");
        if (nccl.available()) {
          const double nccl_us = time_us([&] { nccl.all_reduce(x.data(), nccl_sum, n, stream); });
          row.number("nccl_all_reduce_us", nccl_us, "%.2f")
              .number("fused_vs_nccl", nccl_us / fused, "%.2f")
              .number("nccl_wrong", nccl_wrong, "%.0f");
        } else {
          row.text("nccl", nccl.skipped());
        }
        rows.push_back(row);
        ctx.barrier();
      }
    }
    if (ctx.rank() == 0)
      iris::bench::report("allreduce_rmsnorm: all-reduce + residual + RMSNorm, bf16, graph of " +
                              std::to_string(kCalls) + " calls",
                          rows, json, note);
    IRIS_CUDA_CHECK(cudaStreamDestroy(stream));
    cudaFree(residual);
    cudaFree(gamma);
    for (int p = 0; p < 2; ++p) {
      cudaFree(out[p]);
      cudaFree(y[p]);
      cudaFree(y8[p]);
    }
    cudaFree(nccl_sum);
    cudaFree(wrong);
    ctx.barrier();
    if (!wrong_rows.empty()) {  // every rank knows (the counts are the worst rank's)
      if (ctx.rank() == 0)
        for (const std::string& what : wrong_rows)
          std::printf("WRONG: allreduce_rmsnorm %s\n", what.c_str());
      return 1;
    }
  } catch (const iris::Error& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 1;
  }
  return 0;
}
