// iris::ccl against size, in the form of nccl-tests: for every collective and algorithm, from
// 8 B up to --max-bytes, eager and as a CUDA graph: time, algbw, busbw (nccl-tests formulas)
// and wrong elements; with the same run's cudaMemcpy D2D as the ceiling when the ranks share
// one GPU (then their traffic all lands on one HBM), and a sweep of bandwidth against the SM
// budget (blocks per call, up to twice the default budget).
//
//   iris-run -n 8 ./bench_ccl_bench [--max-bytes 256M] [--samples 9] [--json out.json]
//                                   [--tune tuning.json] [--collectives all_reduce,all_gather]
//                                   [--threads 256] (CommunicatorOptions::threads)
//                                   [--max-blocks 0] (CommunicatorOptions::max_blocks)
//                                   [--calls 20] (calls per sample and per graph up to 1 MiB)
//
// size: bytes of the larger buffer as nccl-tests counts it (all_gather: the output,
// reduce_scatter: the input, all_to_all: either). algbw = size / time; busbw = algbw x
// 2(n-1)/n (all_reduce), (n-1)/n (all_gather, reduce_scatter, all_to_all), 1 (broadcast,
// reduce). hbm: when all ranks share one GPU, the bytes every rank's kernels read and write
// in HBM for the algorithm (docs/ccl.md), summed over ranks, per second; vs_memcpy: that
// against cudaMemcpy D2D of `size` bytes (read + write) in the same run.
// NCCL: with one GPU per rank (and a build that found NCCL) every collective also runs through
// NCCL on the same buffers, sizes and type, timed the same way in the same run: rows with
// algorithm "nccl", and on every row vs_nccl = busbw / NCCL's busbw at that collective, mode
// and size (above 1: faster than NCCL), plus a table of the fastest iris::ccl algorithm
// (graph mode) against NCCL per size. all_to_all is NCCL's grouped ncclSend/ncclRecv. The
// bench sets NCCL_NVLS_ENABLE=0 (no NVLink multicast). NCCL refuses two ranks on one GPU, so
// with ranks sharing a GPU (or without NCCL in the build) the table says it was skipped.
// --tune writes the selection table (fastest graph-mode algorithm per size range) as JSON for
// IRIS_CCL_TUNING.
// With all_reduce run up to 64 KiB: its fastest graph-mode time per size against one barrier
// across the same ranks replayed from a graph in the same run (ctx.device_barrier, and
// iris::ccl's barrier collective).
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "iris/ccl.hpp"
#include "iris/iris.hpp"
#include "nccl_baseline.hpp"
#include "report.hpp"

namespace {

using iris::ccl::Algorithm;
using iris::ccl::Collective;
using iris::ccl::ReduceOp;

/// Sizes up to this are compared with a barrier's latency (the small all_reduce table).
constexpr std::size_t kLatencyBytes = std::size_t{64} << 10;

struct Case {
  Collective collective;
  Algorithm algorithm;
  bool nccl = false;  ///< the NCCL baseline of `collective` (then `algorithm` is unused)
};

std::string algorithm_name(const Case& k) {
  return k.nccl ? "nccl" : std::string(iris::ccl::to_string(k.algorithm));
}

std::size_t parse_bytes_arg(int argc, char** argv, const char* flag, std::size_t fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], flag) == 0) return iris::env::parse_size(argv[i + 1], flag);
  return fallback;
}

std::string string_arg(int argc, char** argv, const char* flag, const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], flag) == 0) return argv[i + 1];
  return fallback;
}

double bus_factor(Collective c, int n) {
  switch (c) {
    case Collective::kAllReduce:
      return 2.0 * (n - 1) / n;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll:
      return static_cast<double>(n - 1) / n;
    default:
      return 1.0;
  }
}

/// HBM bytes all ranks' kernels read plus write for one call of `size` bytes (docs/ccl.md).
double hbm_bytes(Case k, double size, int n) {
  double per_rank = 0;
  switch (k.collective) {
    case Collective::kAllReduce:
      // Packets are 16 bytes per 8 of payload. one_shot: n - 1 copies out and in; two_shot in
      // packets: the n - 1 foreign shares out to their owners and read there, the owner's
      // results out and read by the others, 4 (n - 1) / n of the message in packets each way.
      // one_shot_push: src read once and written into n - 1 rows out, then the n - 1 rows and
      // src read and dst written.
      per_rank = k.algorithm == Algorithm::kOneShot          ? 4.0 * (n - 1) * size + 2 * size
                 : k.algorithm == Algorithm::kTwoShotPackets ? 8.0 * (n - 1) * size / n + 2 * size
                 : k.algorithm == Algorithm::kOneShotPull    ? (n + 1.0) * size
                 : k.algorithm == Algorithm::kOneShotPush    ? (2.0 * n + 1) * size
                                                             : 2.0 * size;
      break;
    case Collective::kReduceScatter:
      // pull: every part read once, one part written; ring: in each of n - 1 steps a part of
      // partial sums (fp32 here) or input read from the neighbour, one of the own input read,
      // one staged or written.
      per_rank =
          k.algorithm == Algorithm::kRing ? 3.0 * (n - 1) * size / n : size * (1.0 + 1.0 / n);
      break;
    default:
      per_rank = 2.0 * size;
      break;
  }
  return per_rank * n;
}

std::string human(std::size_t bytes) {
  char text[32];
  if (bytes >= (1u << 30))
    std::snprintf(text, sizeof(text), "%zuG", bytes >> 30);
  else if (bytes >= (1u << 20))
    std::snprintf(text, sizeof(text), "%zuM", bytes >> 20);
  else if (bytes >= (1u << 10))
    std::snprintf(text, sizeof(text), "%zuK", bytes >> 10);
  else
    std::snprintf(text, sizeof(text), "%zu", bytes);
  return text;
}

__global__ void fill_floats(float* p, std::size_t n, float value) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x)
    p[i] = value;
}

__global__ void count_not_equal(const float* p, std::size_t n, float value,
                                unsigned long long* wrong) {
  unsigned long long mine = 0;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x)
    mine += p[i] != value;
  if (mine) atomicAdd(wrong, mine);
}

}  // namespace

int main(int argc, char** argv) {
  if (!example::gpu_visible("ccl_bench")) return 0;
  const std::size_t max_bytes = parse_bytes_arg(argc, argv, "--max-bytes", std::size_t{1} << 30);
  const std::size_t min_bytes = parse_bytes_arg(argc, argv, "--min-bytes", 8);
  const int samples = static_cast<int>(example::number_arg(argc, argv, "--samples", 9));
  const std::string json = iris::bench::json_path_from_args(argc, argv);
  const std::string tune = string_arg(argc, argv, "--tune", "");
  const std::string only = string_arg(argc, argv, "--collectives", "");
  // Calls per sample (and per graph) up to 1 MiB: the first call of a sample absorbs the ranks'
  // skew, so more calls spread it thinner.
  const int small_calls = static_cast<int>(example::number_arg(argc, argv, "--calls", 20));

  iris::ContextOptions options;
  options.heap_size = 2 * max_bytes + (std::size_t{96} << 20);
  iris::Context ctx = iris::Context::from_env(options);
  iris::ccl::CommunicatorOptions comm_options;
  comm_options.threads =
      static_cast<int>(example::number_arg(argc, argv, "--threads", comm_options.threads));
  comm_options.max_blocks =
      static_cast<int>(example::number_arg(argc, argv, "--max-blocks", comm_options.max_blocks));
  iris::ccl::Communicator comm(ctx, comm_options);
  const int n = comm.size();
  const bool leader = ctx.rank() == 0;

  const bool one_gpu = iris::bench::ranks_on_one_gpu(ctx.bootstrap());
  // NCCL where every rank has its own GPU and the build has NCCL (never NVLink multicast).
  std::optional<iris::bench::NcclBaseline> baseline;
  baseline.emplace(ctx);
  const bool use_nccl = baseline->available();
  const std::string nccl_note =
      use_nccl ? "NCCL: measured (algorithm nccl; vs_nccl = busbw / NCCL busbw; NCCL_NVLS_ENABLE=0)"
               : baseline->note();
#if IRIS_BENCH_HAVE_NCCL
  using iris::bench::nccl_check;
  const ncclComm_t nccl = use_nccl ? baseline->comm() : nullptr;
#endif

  auto* a = static_cast<std::byte*>(ctx.allocate_bytes(max_bytes));
  auto* b = static_cast<std::byte*>(ctx.allocate_bytes(max_bytes));
  auto* wrong = static_cast<unsigned long long*>(ctx.allocate_bytes(sizeof(unsigned long long)));
  cudaStream_t stream;
  IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  std::vector<Case> cases = {{Collective::kAllReduce, Algorithm::kOneShot},
                             {Collective::kAllReduce, Algorithm::kOneShotPull},
                             {Collective::kAllReduce, Algorithm::kOneShotPush},
                             {Collective::kAllReduce, Algorithm::kTwoShot},
                             {Collective::kAllReduce, Algorithm::kTwoShotPackets},
                             {Collective::kAllGather, Algorithm::kPull},
                             {Collective::kAllGather, Algorithm::kPush},
                             {Collective::kAllGather, Algorithm::kRing},
                             {Collective::kReduceScatter, Algorithm::kPull},
                             {Collective::kReduceScatter, Algorithm::kRing},
                             {Collective::kAllToAll, Algorithm::kPull},
                             {Collective::kAllToAll, Algorithm::kPush},
                             {Collective::kBroadcast, Algorithm::kPull}};
  if (!only.empty())
    cases.erase(
        std::remove_if(cases.begin(), cases.end(),
                       [&](const Case& k) {
                         return only.find(std::string(iris::ccl::to_string(k.collective))) ==
                                std::string::npos;
                       }),
        cases.end());
  // The NCCL baseline of each collective measured, first, so that every iris::ccl row can
  // compare itself with it.
  if (use_nccl) {
    std::vector<Case> baselines;
    for (const Case& k : cases)
      if (std::none_of(baselines.begin(), baselines.end(),
                       [&](const Case& c) { return c.collective == k.collective; }))
        baselines.push_back({k.collective, Algorithm::kAuto, true});
    cases.insert(cases.begin(), baselines.begin(), baselines.end());
  }

  // One call of `size` bytes (nccl-tests' size) with algorithm k and the given block budget.
  auto enqueue = [&](Case k, std::size_t size, int blocks) {
    const iris::ccl::Options o{.algorithm = k.algorithm, .max_blocks = blocks};
    const std::size_t count = size / sizeof(float);
    const std::size_t part = size / n;
#if IRIS_BENCH_HAVE_NCCL
    if (k.nccl) {
      switch (k.collective) {
        case Collective::kAllReduce:
          nccl_check(ncclAllReduce(a, b, count, ncclFloat, ncclSum, nccl, stream), "ncclAllReduce");
          break;
        case Collective::kAllGather:
          nccl_check(ncclAllGather(a, b, part, ncclChar, nccl, stream), "ncclAllGather");
          break;
        case Collective::kReduceScatter:
          nccl_check(ncclReduceScatter(a, b, count / n, ncclFloat, ncclSum, nccl, stream),
                     "ncclReduceScatter");
          break;
        case Collective::kAllToAll:
          nccl_check(ncclGroupStart(), "ncclGroupStart");
          for (int p = 0; p < n; ++p) {
            nccl_check(
                ncclSend(a + static_cast<std::size_t>(p) * part, part, ncclChar, p, nccl, stream),
                "ncclSend");
            nccl_check(
                ncclRecv(b + static_cast<std::size_t>(p) * part, part, ncclChar, p, nccl, stream),
                "ncclRecv");
          }
          nccl_check(ncclGroupEnd(), "ncclGroupEnd");
          break;
        case Collective::kBroadcast:
          nccl_check(ncclBroadcast(a, b, size, ncclChar, 0, nccl, stream), "ncclBroadcast");
          break;
        default:
          break;
      }
      return;
    }
#endif
    switch (k.collective) {
      case Collective::kAllReduce:
        comm.all_reduce(reinterpret_cast<float*>(b), reinterpret_cast<float*>(a), count,
                        ReduceOp::kSum, stream, o);
        break;
      case Collective::kAllGather:
        comm.all_gather_bytes(b, a, part, stream, o);
        break;
      case Collective::kReduceScatter:
        comm.reduce_scatter(reinterpret_cast<float*>(b), reinterpret_cast<float*>(a), count / n,
                            ReduceOp::kSum, stream, o);
        break;
      case Collective::kAllToAll:
        comm.all_to_all_bytes(b, a, part, stream, o);
        break;
      case Collective::kBroadcast:
        comm.broadcast_bytes(b, a, size, 0, stream, o);
        break;
      default:
        break;
    }
  };
  auto runnable = [&](Case k, std::size_t size) {
    if (size < sizeof(float) * n) return false;
    if (k.nccl) return true;
    const bool whole =
        k.collective == Collective::kAllReduce || k.collective == Collective::kBroadcast;
    return comm.cannot_run(k.collective, k.algorithm, whole ? size : size / n).empty();
  };
  // Wrong elements of one all_reduce / reduce_scatter of ones*(rank+1) (sum: n(n+1)/2), or of a
  // movement (checked as floats equal to rank+1 of the source... every float is rank-dependent,
  // so movement collectives are counted by comparing against the expected rank's value).
  auto check = [&](Case k, std::size_t size) -> unsigned long long {
    const std::size_t floats = size / sizeof(float);
    fill_floats<<<256, 256, 0, stream>>>(reinterpret_cast<float*>(a), floats,
                                         float(ctx.rank() + 1));
    IRIS_CUDA_CHECK(cudaMemsetAsync(wrong, 0, sizeof(*wrong), stream));
    IRIS_CUDA_CHECK(cudaMemsetAsync(b, 0xff, size, stream));
    enqueue(k, size, 0);
    const float sum = static_cast<float>(n * (n + 1) / 2);
    switch (k.collective) {
      case Collective::kAllReduce:
        count_not_equal<<<256, 256, 0, stream>>>(reinterpret_cast<float*>(b), floats, sum, wrong);
        break;
      case Collective::kReduceScatter:
        count_not_equal<<<256, 256, 0, stream>>>(reinterpret_cast<float*>(b), floats / n, sum,
                                                 wrong);
        break;
      case Collective::kBroadcast:
        count_not_equal<<<256, 256, 0, stream>>>(reinterpret_cast<float*>(b), floats, 1.0f, wrong);
        break;
      default: {  // all_gather / all_to_all: part k holds member k's value
        const std::size_t part = size / n / sizeof(float);
        for (int m = 0; m < n; ++m)
          count_not_equal<<<64, 256, 0, stream>>>(reinterpret_cast<float*>(b + m * (size / n)),
                                                  part, float(m + 1), wrong);
        break;
      }
    }
    unsigned long long host = 0;
    IRIS_CUDA_CHECK(cudaMemcpyAsync(&host, wrong, sizeof(host), cudaMemcpyDeviceToHost, stream));
    IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
    return static_cast<unsigned long long>(
        iris::bench::slowest_rank(ctx.bootstrap(), static_cast<double>(host)));
  };

  // The median time of one call that `enqueue_one` queues on `stream` (`size` bytes: how many
  // calls a sample takes), eager or replayed from a graph of a sample's calls; the slowest rank's.
  auto timed = [&](auto&& enqueue_one, std::size_t size, bool graph) {
    example::Repeats repeats;
    repeats.samples = samples;
    repeats.warmup = 2;
    repeats.calls_per_sample = size <= (std::size_t{1} << 20)    ? small_calls
                               : size <= (std::size_t{64} << 20) ? 4
                                                                 : 1;
    double ms = 0;
    if (!graph) {
      ms = example::summarize(
               example::time_calls_ms(
                   stream, repeats, [&](long) { enqueue_one(); }, [&] { comm.barrier(stream); }))
               .median;
    } else {
      cudaGraph_t g;
      IRIS_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < repeats.calls_per_sample; ++i) enqueue_one();
      IRIS_CUDA_CHECK(cudaStreamEndCapture(stream, &g));
      cudaGraphExec_t exec;
      IRIS_CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
      const int per = repeats.calls_per_sample;
      repeats.calls_per_sample = 1;
      ms = example::summarize(example::time_calls_ms(
                                  stream, repeats,
                                  [&](long) { IRIS_CUDA_CHECK(cudaGraphLaunch(exec, stream)); },
                                  [&] { comm.barrier(stream); }))
               .median /
           per;
      IRIS_CUDA_CHECK(cudaGraphExecDestroy(exec));
      IRIS_CUDA_CHECK(cudaGraphDestroy(g));
    }
    return iris::bench::slowest_rank(ctx.bootstrap(), ms);
  };
  auto time_ms = [&](Case k, std::size_t size, bool graph, int blocks) {
    return timed([&] { enqueue(k, size, blocks); }, size, graph);
  };

  std::vector<std::size_t> sizes;
  for (std::size_t s = min_bytes; s <= max_bytes; s *= 2) sizes.push_back(s);

  // The ceiling: cudaMemcpy D2D of each size, one rank at a time... all ranks at once when they
  // share the GPU would split it, so rank 0 alone measures it while the others wait.
  std::vector<double> memcpy_gbps(sizes.size(), 0);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    double ms = 0;
    if (leader) {
      example::Repeats r;
      r.samples = samples;
      r.calls_per_sample = sizes[i] <= (std::size_t{1} << 20) ? 20 : 2;
      ms = example::median_ms(stream, r, [&](long) {
        IRIS_CUDA_CHECK(cudaMemcpyAsync(b, a, sizes[i], cudaMemcpyDeviceToDevice, stream));
      });
    }
    ctx.barrier();
    memcpy_gbps[i] = iris::bench::slowest_rank(ctx.bootstrap(),
                                               leader ? example::gb_per_s(2.0 * sizes[i], ms) : 0);
  }

  std::vector<iris::bench::Row> rows;
  const std::size_t total = cases.size() * sizes.size();
  std::size_t done = 0;
  // best[collective][size index] = (time, algorithm) in graph mode, for --tune
  struct Best {
    double ms = 1e30;
    Algorithm algorithm = Algorithm::kAuto;
  };
  std::vector<std::vector<Best>> best(iris::ccl::kCollectiveCount, std::vector<Best>(sizes.size()));
  // nccl_ms[collective][graph][size index]: NCCL's time (0: not measured)
  std::vector<std::array<std::vector<double>, 2>> nccl_ms(iris::ccl::kCollectiveCount);
  for (auto& modes : nccl_ms)
    for (auto& by_size : modes) by_size.assign(sizes.size(), 0.0);
  for (const Case& k : cases) {
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      ++done;
      const std::size_t size = sizes[i];
      if (!runnable(k, size)) continue;
      if (leader)
        std::fprintf(stderr, "[ccl_bench] %zu/%zu %s %s %s\n", done, total,
                     std::string(iris::ccl::to_string(k.collective)).c_str(),
                     algorithm_name(k).c_str(), human(size).c_str());
      const unsigned long long errors = check(k, size);
      for (bool graph : {false, true}) {
        const double ms = time_ms(k, size, graph, 0);
        const int c = static_cast<int>(k.collective);
        if (k.nccl)
          nccl_ms[c][graph][i] = ms;
        else if (graph && ms < best[c][i].ms)
          best[c][i] = {ms, k.algorithm};
        const double algbw = example::gb_per_s(static_cast<double>(size), ms);
        iris::bench::Row row;
        row.text("collective", std::string(iris::ccl::to_string(k.collective)))
            .text("algorithm", algorithm_name(k))
            .text("mode", graph ? "graph" : "eager")
            .number("size", static_cast<double>(size), "%.0f")
            .number("count", static_cast<double>(size / sizeof(float)), "%.0f")
            .text("type", "float")
            .number("time_us", ms * 1e3, "%.2f")
            .number("algbw_GBps", algbw, "%.2f")
            .number("busbw_GBps", algbw * bus_factor(k.collective, n), "%.2f")
            .number("wrong", static_cast<double>(errors), "%.0f");
        if (one_gpu) {
          const double hbm = example::gb_per_s(hbm_bytes(k, static_cast<double>(size), n), ms);
          row.number("hbm_GBps", hbm, "%.1f").number("vs_memcpy", hbm / memcpy_gbps[i], "%.3f");
        }
        if (use_nccl) {
          const double baseline = nccl_ms[c][graph][i];
          row.number("vs_nccl", baseline > 0 ? baseline / ms : 0.0, "%.3f");
        }
        rows.push_back(row);
      }
    }
  }
  // The fastest iris::ccl algorithm in graph mode against NCCL in graph mode, per size.
  std::vector<iris::bench::Row> against_nccl;
  if (use_nccl)
    for (int c = 0; c < iris::ccl::kCollectiveCount; ++c)
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        const double baseline = nccl_ms[c][1][i];
        if (baseline <= 0 || best[c][i].algorithm == Algorithm::kAuto) continue;
        const double factor = bus_factor(static_cast<Collective>(c), n);
        const double size = static_cast<double>(sizes[i]);
        iris::bench::Row row;
        row.text("collective", std::string(iris::ccl::to_string(static_cast<Collective>(c))))
            .number("size", size, "%.0f")
            .text("iris_algorithm", std::string(iris::ccl::to_string(best[c][i].algorithm)))
            .number("iris_busbw_GBps", example::gb_per_s(size, best[c][i].ms) * factor, "%.2f")
            .number("nccl_busbw_GBps", example::gb_per_s(size, baseline) * factor, "%.2f")
            .number("iris_over_nccl", baseline / best[c][i].ms, "%.3f");
        against_nccl.push_back(row);
      }
  std::vector<iris::bench::Row> ceiling;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    iris::bench::Row row;
    row.number("size", static_cast<double>(sizes[i]), "%.0f")
        .number("memcpy_d2d_GBps", memcpy_gbps[i], "%.1f");
    ceiling.push_back(row);
  }

  // Small all_reduce in graph mode against one barrier across the same ranks, also in graph
  // mode, in the same run: the host's ctx.device_barrier (one warp meeting every rank) and
  // iris::ccl's own barrier (a collective kernel with nothing to move).
  std::vector<iris::bench::Row> latency_rows;
  const auto& small = best[static_cast<int>(Collective::kAllReduce)];
  if (std::any_of(small.begin(), small.end(),
                  [](const Best& b) { return b.algorithm != Algorithm::kAuto; })) {
    const double device_barrier_ms = timed([&] { ctx.device_barrier(stream); }, 0, true);
    const double ccl_barrier_ms = timed([&] { comm.barrier(stream); }, 0, true);
    for (std::size_t i = 0; i < sizes.size() && sizes[i] <= kLatencyBytes; ++i) {
      if (small[i].algorithm == Algorithm::kAuto) continue;
      iris::bench::Row row;
      row.number("size", static_cast<double>(sizes[i]), "%.0f")
          .text("fastest", std::string(iris::ccl::to_string(small[i].algorithm)))
          .number("time_us", small[i].ms * 1e3, "%.2f")
          .number("device_barrier_us", device_barrier_ms * 1e3, "%.2f")
          .number("ccl_barrier_us", ccl_barrier_ms * 1e3, "%.2f")
          .number("vs_device_barrier", small[i].ms / device_barrier_ms, "%.2f");
      latency_rows.push_back(row);
    }
  }

  // SM budget: bandwidth against blocks per call at the largest size: powers of two up to the
  // collective's default budget, the budget, and past it up to twice the budget (at most
  // Communicator::block_limit). The default budget is half of what the GPU holds at once across the
  // ranks on it, so that two calls in flight stay co-resident; with one call in flight at a time
  // (as here) twice the budget still fits, which shows what the halving costs.
  std::vector<iris::bench::Row> budget_rows;
  const std::size_t sweep_size = sizes.empty() ? 0 : sizes.back();
  for (Case k : {Case{Collective::kAllReduce, Algorithm::kTwoShot},
                 Case{Collective::kAllReduce, Algorithm::kOneShotPull},
                 Case{Collective::kReduceScatter, Algorithm::kPull},
                 Case{Collective::kReduceScatter, Algorithm::kRing},
                 Case{Collective::kAllGather, Algorithm::kPull},
                 Case{Collective::kAllToAll, Algorithm::kPull}}) {
    if (sweep_size == 0 || !runnable(k, sweep_size)) continue;
    if (!only.empty() &&
        only.find(std::string(iris::ccl::to_string(k.collective))) == std::string::npos)
      continue;
    const int budget = comm.max_blocks(k.collective);
    const int most = std::min(2 * budget, comm.block_limit(k.collective));
    std::vector<int> counts;
    for (int b = 1; b < budget; b *= 2) counts.push_back(b);
    for (int b : {budget, budget + budget / 2, most})
      if (b <= most && (counts.empty() || b > counts.back())) counts.push_back(b);
    for (int blocks : counts) {
      if (leader)
        std::fprintf(stderr, "[ccl_bench] SM budget %s %d blocks\n",
                     std::string(iris::ccl::to_string(k.collective)).c_str(), blocks);
      const double ms = time_ms(k, sweep_size, true, blocks);
      const double algbw = example::gb_per_s(static_cast<double>(sweep_size), ms);
      iris::bench::Row row;
      row.text("collective", std::string(iris::ccl::to_string(k.collective)))
          .text("algorithm", std::string(iris::ccl::to_string(k.algorithm)))
          .number("size", static_cast<double>(sweep_size), "%.0f")
          .number("blocks", blocks, "%.0f")
          .number("busbw_GBps", algbw * bus_factor(k.collective, n), "%.2f");
      if (one_gpu) {
        const double hbm = example::gb_per_s(hbm_bytes(k, static_cast<double>(sweep_size), n), ms);
        row.number("vs_memcpy", hbm / memcpy_gbps.back(), "%.3f");
      }
      budget_rows.push_back(row);
    }
  }

  if (leader) {
    const std::string note =
        "ranks " + std::to_string(n) + (one_gpu ? " sharing one GPU" : " on separate GPUs") +
        ", SM budget " + std::to_string(comm.max_blocks(Collective::kAllReduce)) +
        " blocks (reducing), " + std::to_string(comm.max_blocks(Collective::kAllGather)) +
        " (moving), " + std::to_string(comm_options.threads) + " threads per block, " +
        std::to_string(small_calls) + " calls per sample up to 1 MiB; " + nccl_note;
    iris::bench::report("ccl_bench: collectives (" + std::to_string(n) + " ranks)", rows, json,
                        note);
    iris::bench::report("ccl_bench: cudaMemcpy D2D ceiling (read + write bytes)", ceiling,
                        json.empty() ? "" : json + ".memcpy.json");
    if (!latency_rows.empty())
      iris::bench::report(
          "ccl_bench: small all_reduce (graph) against one barrier (graph)", latency_rows,
          json.empty() ? "" : json + ".latency.json",
          note +
              "; fastest: the fastest all_reduce algorithm at the size; vs_device_barrier = "
              "time / device_barrier time (the mark: within 2x up to 64 KiB)");
    iris::bench::report("ccl_bench: busbw against the SM budget", budget_rows,
                        json.empty() ? "" : json + ".budget.json", note);
    if (use_nccl)
      iris::bench::report("ccl_bench: fastest iris::ccl (graph) against NCCL (graph), busbw",
                          against_nccl, json.empty() ? "" : json + ".nccl.json", note);
    std::printf("%s\n", nccl_note.c_str());
    if (!tune.empty()) {
      iris::ccl::TuningTable table;
      for (int c = 0; c < iris::ccl::kCollectiveCount; ++c) {
        std::size_t start = 0;
        for (std::size_t i = 0; i < sizes.size(); ++i) {
          const Algorithm alg = best[c][i].algorithm;
          if (alg == Algorithm::kAuto) continue;
          const bool last = i + 1 == sizes.size() || best[c][i + 1].algorithm != alg;
          if (!last) continue;
          iris::ccl::TuningEntry e;
          e.collective = static_cast<Collective>(c);
          e.team_min = e.team_max = n;
          e.bytes_min = start;
          if (i + 1 < sizes.size()) e.bytes_max = sizes[i] * 2 - 1;  // up to the next size measured
          e.algorithm = alg;
          table.add(e);
          start = e.bytes_max + 1;
        }
      }
      std::ofstream(tune) << table.to_json();
      std::printf("wrote the selection table %s\n", tune.c_str());
    }
  }
  IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  baseline.reset();  // the NCCL communicator, after its last call completed
  ctx.barrier();
  return 0;
}
