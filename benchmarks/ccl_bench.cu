// iris::ccl against size, in the form of nccl-tests: for every collective and algorithm, from
// 8 B up to --max-bytes, eager and as a CUDA graph: time, algbw, busbw (nccl-tests formulas)
// and wrong elements; with the same run's cudaMemcpy D2D as the ceiling when the ranks share
// one GPU (then their traffic all lands on one HBM), and a sweep of bandwidth against the SM
// budget (blocks per call, up to twice the default budget).
//
//   iris-run -n 8 ./bench_ccl_bench [--min-bytes 8] [--max-bytes 1G] [--samples 9]
//                                   [--json out.json] [--csv out.csv] [--tune tuning.json]
//                                   [--collectives all_reduce,all_gather] (comma-separated)
//                                   [--threads 256] (CommunicatorOptions::threads)
//                                   [--max-blocks 0] (CommunicatorOptions::max_blocks)
//                                   [--staging-bytes 32M] (CommunicatorOptions::staging_bytes)
//                                   [--calls 20] (calls per sample and per graph up to 1 MiB;
//                                   4 above, for the memcpy too)
//
// Collectives (root 0 where there is one; reductions: float sums): all_reduce, reduce_scatter,
// reduce, all_gather, all_to_all, all_to_allv (equal counts, so it compares with all_to_all),
// broadcast, gather, scatter, send_recv (a ring: every rank sends to rank + 1 while it receives
// from rank - 1). Every case is checked once before it is timed: rank-dependent sources, a
// poisoned destination, every element compared on the device; a case with wrong elements
// prints a line "WRONG: ...", is left out of every "fastest" choice (--tune, the barrier and
// NCCL tables), and makes the bench exit 1 after it wrote its reports.
// size: bytes of the larger buffer as nccl-tests counts it (all_gather, gather: the output;
// reduce_scatter, scatter: the input; all_to_all(v): either; send_recv: what a rank sends),
// rounded down as nccl-tests does to whole floats, per member for the collectives that split
// their buffer into one part per member (from 4 x ranks bytes; the others from 4 B).
// algbw = size / time; busbw = algbw x 2(n-1)/n (all_reduce), (n-1)/n (reduce_scatter,
// all_gather, all_to_all(v), gather, scatter), 1 (broadcast, reduce, send_recv). redop and root
// as nccl-tests prints them ("none" and -1 where a collective has none). hbm: when all ranks
// share one GPU, the bytes every rank's kernels read and write in HBM for the algorithm
// (docs/ccl.md), summed over ranks, per second; vs_memcpy: that against cudaMemcpy D2D of
// `size` bytes (read + write) in the same run.
// NCCL: with one GPU per rank (and a build that found NCCL) every collective also runs through
// NCCL on the same buffers, sizes and type, timed the same way in the same run: rows with
// algorithm "nccl", and on every row vs_nccl = busbw / NCCL's busbw at that collective, mode
// and size (above 1: faster than NCCL), plus a table of the fastest iris::ccl algorithm
// (graph mode) against NCCL per size. all_to_all, gather, scatter and send_recv are NCCL's
// grouped ncclSend/ncclRecv as nccl-tests runs them; all_to_allv is compared with NCCL's
// all_to_all (its rows say all_to_all). The bench sets NCCL_NVLS_ENABLE=0 (no NVLink
// multicast). NCCL refuses two ranks on one GPU, so with ranks sharing a GPU (or without NCCL
// in the build, or where NCCL fails to start on any rank) the tables say it was skipped and
// why; rank 0 says so at start-up too.
// --tune FILE merges the selection table (fastest graph-mode algorithm per size range) into FILE
// for IRIS_CCL_TUNING: the entries of this team size for the collectives measured are replaced,
// the rest kept, so that runs at 2, 4 and 8 ranks build one table. The library selects
// all_gather, reduce_scatter, all_to_all, gather and scatter by the bytes of one member's part,
// the others by the whole message, and the entries are in those bytes.
// --json / --csv: the main table to the path, the others beside it (.memcpy, .latency,
// .budget, .nccl: out.json.memcpy.json, out.csv.memcpy.csv, ...).
// With all_reduce run up to 64 KiB: its fastest graph-mode time per size against one barrier
// across the same ranks replayed from a graph in the same run (ctx.device_barrier, and
// iris::ccl's barrier collective).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "common/exit_codes.hpp"
#include "iris/ccl.hpp"
#include "iris/iris.hpp"
#include "nccl_baseline.hpp"
#include "report.hpp"

namespace {

/// Calls per sample above 1 MiB (the memcpy's and every collective's).
constexpr int kLargeCalls = 4;

using iris::ccl::Algorithm;
using iris::ccl::Collective;
using iris::ccl::ReduceOp;
using iris::ccl::TuningEntry;
using iris::ccl::TuningTable;

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

std::string collective_name(Collective c) {
  return std::string(iris::ccl::to_string(c));
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

/// --collectives' comma-separated names, each exactly (reduce is not all_reduce): true at each
/// collective named. An unknown name is an iris::Error that lists the known ones.
std::vector<bool> parse_collectives(const std::string& list) {
  std::vector<bool> wanted(iris::ccl::kCollectiveCount, false);
  for (std::size_t pos = 0; pos <= list.size();) {
    const std::size_t end = std::min(list.find(',', pos), list.size());
    if (end > pos)
      wanted[static_cast<int>(iris::ccl::parse_collective(list.substr(pos, end - pos)))] = true;
    pos = end + 1;
  }
  return wanted;
}

/// The collectives whose buffer holds one part per member: nccl-tests' size counts every part,
/// and the library selects their algorithm by one part's bytes.
bool splits(Collective c) {
  return c == Collective::kAllGather || c == Collective::kReduceScatter ||
         c == Collective::kAllToAll || c == Collective::kAllToAllv || c == Collective::kGather ||
         c == Collective::kScatter;
}

bool reduces(Collective c) {
  return c == Collective::kAllReduce || c == Collective::kReduceScatter || c == Collective::kReduce;
}

bool rooted(Collective c) {
  return c == Collective::kBroadcast || c == Collective::kReduce || c == Collective::kGather ||
         c == Collective::kScatter;
}

/// The bytes a case of nominal size `size` moves, rounded down as nccl-tests does: to whole
/// floats, and to whole floats per member where the buffer splits (0: too small to run).
std::size_t case_bytes(Collective c, std::size_t size, int n) {
  const std::size_t unit = sizeof(float) * (splits(c) ? static_cast<std::size_t>(n) : 1);
  return size / unit * unit;
}

/// The bytes the library selects an algorithm by for a call of `bytes` (Communicator::plan):
/// one member's part where the buffer splits, else the whole message.
std::size_t selection_bytes(Collective c, std::size_t bytes, int n) {
  return splits(c) ? bytes / static_cast<std::size_t>(n) : bytes;
}

/// The collective whose NCCL baseline `c` is compared with: all_to_allv with equal counts moves
/// what all_to_all moves, and NCCL has no other form of either than grouped send/recv.
Collective nccl_twin(Collective c) {
  return c == Collective::kAllToAllv ? Collective::kAllToAll : c;
}

double bus_factor(Collective c, int n) {
  if (c == Collective::kAllReduce) return 2.0 * (n - 1) / n;
  if (splits(c)) return static_cast<double>(n - 1) / n;
  return 1.0;  // broadcast, reduce, send_recv
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
    case Collective::kReduce:
      // pull: the root reads every member's src and writes its dst; push: member k reads shard
      // k of every member's src and writes it into the root's dst. The same bytes in all.
      per_rank = (n + 1.0) * size / n;
      break;
    case Collective::kGather:
    case Collective::kScatter:
      // Each part is read once and written once, into or out of the root's buffer.
      per_rank = 2.0 * size / n;
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

/// Part j (of `parts` parts of `part` floats) of p = base + step * j.
__global__ void fill_parts(float* p, std::size_t part, int parts, float base, float step) {
  const std::size_t n = part * parts;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x)
    p[i] = base + step * static_cast<float>(i / part);
}

/// Counts into *wrong the floats of part j (of `parts` parts of `part`) that are not base +
/// step * j.
__global__ void count_wrong_parts(const float* p, std::size_t part, int parts, float base,
                                  float step, unsigned long long* wrong) {
  const std::size_t n = part * parts;
  unsigned long long mine = 0;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x)
    mine += p[i] != base + step * static_cast<float>(i / part);
  if (mine) atomicAdd(wrong, mine);
}

/// The selection table's entries of collective `c` for `team_size` members: one per run of
/// sizes with the same fastest algorithm (fastest[i], kAuto where none was measured right), from
/// where the previous entry ended up to just below bytes[i + 1] (the selection bytes of the next
/// size measured; the last entry is unbounded).
std::vector<TuningEntry> tuning_runs(Collective c, int team_size,
                                     const std::vector<Algorithm>& fastest,
                                     const std::vector<std::size_t>& bytes) {
  std::vector<TuningEntry> entries;
  std::size_t start = 0;
  for (std::size_t i = 0; i < fastest.size(); ++i) {
    const Algorithm alg = fastest[i];
    if (alg == Algorithm::kAuto) continue;
    const bool last = i + 1 == fastest.size() || fastest[i + 1] != alg;
    if (!last) continue;
    TuningEntry e;
    e.collective = c;
    e.team_min = e.team_max = team_size;
    e.bytes_min = start;
    if (i + 1 < fastest.size()) e.bytes_max = bytes[i + 1] - 1;
    e.algorithm = alg;
    entries.push_back(e);
    start = e.bytes_max + 1;
  }
  return entries;
}

/// `old` with its entries for `team_size` members of the collectives in `replaced` taken out
/// (an entry whose team range spans other sizes too keeps them), then `measured`: runs at 2, 4
/// and 8 ranks each replace their own entries and keep the others'. What stays of `old` matches
/// no call of this team size that `measured` is about, so appending keeps first-match order.
TuningTable merged_table(const TuningTable& old, int team_size, const std::vector<bool>& replaced,
                         const std::vector<TuningEntry>& measured) {
  TuningTable table;
  for (const TuningEntry& e : old.entries()) {
    if (!replaced[static_cast<int>(e.collective)] || team_size < e.team_min ||
        team_size > e.team_max) {
      table.add(e);
      continue;
    }
    if (e.team_min < team_size) {
      TuningEntry below = e;
      below.team_max = team_size - 1;
      table.add(below);
    }
    if (e.team_max > team_size) {
      TuningEntry above = e;
      above.team_min = team_size + 1;
      table.add(above);
    }
  }
  for (const TuningEntry& e : measured) table.add(e);
  return table;
}

}  // namespace

int main(int argc, char** argv) {
  if (!example::gpu_visible("ccl_bench")) return 0;
  const std::size_t max_bytes = parse_bytes_arg(argc, argv, "--max-bytes", std::size_t{1} << 30);
  const std::size_t min_bytes = parse_bytes_arg(argc, argv, "--min-bytes", 8);
  const int samples = static_cast<int>(example::number_arg(argc, argv, "--samples", 9));
  const std::string json = iris::bench::json_path_from_args(argc, argv);
  const std::string csv = iris::bench::csv_path_from_args(argc, argv);
  const std::string tune = string_arg(argc, argv, "--tune", "");
  // --collectives: checked before any rank starts.
  std::vector<bool> wanted(iris::ccl::kCollectiveCount, true);
  if (const std::string only = string_arg(argc, argv, "--collectives", ""); !only.empty()) {
    try {
      wanted = parse_collectives(only);
    } catch (const iris::Error& error) {
      std::fprintf(stderr, "ccl_bench: --collectives: %s\n", error.what());
      return iris::examples::kInvalidSettingExitCode;
    }
  }
  // Calls per sample (and per graph) up to 1 MiB: the first call of a sample absorbs the ranks'
  // skew, so more calls spread it thinner.
  const int small_calls = static_cast<int>(example::number_arg(argc, argv, "--calls", 20));
  const auto also = [](const std::string& path, const char* suffix) {
    return path.empty() ? std::string() : path + suffix;
  };

  iris::ccl::CommunicatorOptions comm_options;
  comm_options.threads =
      static_cast<int>(example::number_arg(argc, argv, "--threads", comm_options.threads));
  comm_options.max_blocks =
      static_cast<int>(example::number_arg(argc, argv, "--max-blocks", comm_options.max_blocks));
  comm_options.staging_bytes =
      parse_bytes_arg(argc, argv, "--staging-bytes", comm_options.staging_bytes);
  // Two buffers of the largest size, the communicator's workspace (its packet slots and
  // staging), and room for the rest (the send/recv communicators, counters, the allocator's
  // alignment).
  iris::ContextOptions options;
  options.heap_size = 2 * max_bytes + comm_options.packet_bytes + comm_options.staging_bytes +
                      (std::size_t{128} << 20);
  iris::Context ctx = iris::Context::from_env(options);
  iris::ccl::Communicator comm(ctx, comm_options);
  const int n = comm.size();
  const int me = comm.index();  // the world's communicator: the index is the rank
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  const bool leader = ctx.rank() == 0;

  const bool one_gpu = iris::bench::ranks_on_one_gpu(ctx.bootstrap());
  // NCCL where every rank has its own GPU, the build has NCCL and it starts on every rank (never
  // NVLink multicast).
  std::optional<iris::bench::NcclBaseline> baseline;
  baseline.emplace(ctx);
  const bool use_nccl = baseline->available();
  const std::string nccl_note =
      use_nccl ? "NCCL: measured (algorithm nccl; vs_nccl = busbw / NCCL busbw; NCCL_NVLS_ENABLE=0)"
               : baseline->note();
  if (leader) std::printf("%s\n", nccl_note.c_str());
#if IRIS_BENCH_HAVE_NCCL
  using iris::bench::nccl_check;
  const ncclComm_t nccl = use_nccl ? baseline->comm() : nullptr;
#endif

  auto* a = static_cast<std::byte*>(ctx.allocate_bytes(max_bytes));
  auto* b = static_cast<std::byte*>(ctx.allocate_bytes(max_bytes));
  auto* wrong = static_cast<unsigned long long*>(ctx.allocate_bytes(sizeof(unsigned long long)));
  // all_to_allv's counts and offsets (floats), on the heap as it requires: send_counts,
  // send_offsets, recv_counts, recv_offsets, n each; check() writes them for each size.
  auto* v_tables =
      static_cast<std::int64_t*>(ctx.allocate_bytes(4 * sizeof(std::int64_t) * std::size_t(n)));
  std::vector<std::int64_t> v_host(4 * std::size_t(n));
  cudaStream_t stream, side;
  IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  cudaEvent_t fork, join;
  IRIS_CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  IRIS_CUDA_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));

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
                             {Collective::kAllToAllv, Algorithm::kPull},
                             {Collective::kBroadcast, Algorithm::kPull},
                             {Collective::kReduce, Algorithm::kPull},
                             {Collective::kReduce, Algorithm::kPush},
                             {Collective::kGather, Algorithm::kPull},
                             {Collective::kGather, Algorithm::kPush},
                             {Collective::kScatter, Algorithm::kPull},
                             {Collective::kSendRecv, Algorithm::kPull}};
  cases.erase(
      std::remove_if(cases.begin(), cases.end(),
                     [&](const Case& k) { return !wanted[static_cast<int>(k.collective)]; }),
      cases.end());
  // iris::ccl algorithms measured per collective: a table entry is only worth writing where
  // there was a choice.
  std::vector<int> algorithms_of(iris::ccl::kCollectiveCount, 0);
  for (const Case& k : cases) ++algorithms_of[static_cast<int>(k.collective)];
  // The NCCL baseline of each collective measured, first, so that every iris::ccl row can
  // compare itself with it.
  if (use_nccl) {
    std::vector<Case> baselines;
    for (const Case& k : cases)
      if (std::none_of(baselines.begin(), baselines.end(),
                       [&](const Case& c) { return c.collective == nccl_twin(k.collective); }))
        baselines.push_back({nccl_twin(k.collective), Algorithm::kAuto, true});
    cases.insert(cases.begin(), baselines.begin(), baselines.end());
  }

  // send_recv as a ring: every rank sends to rank + 1 while it receives from rank - 1. A send
  // returns (on its stream) only once its receiver has read it, so a send and then a recv on
  // one stream would wait on each other all around the ring; the recv runs on a second stream,
  // and since calls on one communicator must not overlap, on a second communicator. Both ends
  // of an edge (rank r sends, r + 1 receives) must use the same one, so edge r uses communicator
  // r mod 2: a rank's send (edge r) and recv (edge r - 1) never share one, and each rank keeps
  // each communicator on one stream. With an odd team, edge n - 1 uses a third (edges n - 1 and
  // 0 would both be even and meet on rank 0). Made only where send_recv runs (the same on every
  // rank: the same arguments); a send/recv needs little workspace.
  std::vector<iris::ccl::Communicator> ring_comms;
  const auto edge_comm = [&](int edge) { return n % 2 == 1 && edge == n - 1 ? 2 : edge % 2; };
  if (wanted[static_cast<int>(Collective::kSendRecv)] && n >= 2) {
    iris::ccl::CommunicatorOptions ring_options = comm_options;
    ring_options.packet_bytes = (2 * std::size_t(n) * 16 + 255) / 256 * 256;  // the least allowed
    ring_options.staging_bytes = 0;
    ring_comms.reserve(3);
    for (int c = 0; c < (n % 2 == 1 ? 3 : 2); ++c) ring_comms.emplace_back(ctx, ring_options);
  }

  // One call of `size` bytes (nccl-tests' size, case_bytes already applied) with algorithm k
  // and the given block budget.
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
        case Collective::kReduce:
          nccl_check(ncclReduce(a, b, count, ncclFloat, ncclSum, 0, nccl, stream), "ncclReduce");
          break;
        case Collective::kGather:  // nccl-tests': every rank sends its part, the root receives all
          nccl_check(ncclGroupStart(), "ncclGroupStart");
          nccl_check(ncclSend(a, part, ncclChar, 0, nccl, stream), "ncclSend");
          if (me == 0)
            for (int p = 0; p < n; ++p)
              nccl_check(
                  ncclRecv(b + static_cast<std::size_t>(p) * part, part, ncclChar, p, nccl, stream),
                  "ncclRecv");
          nccl_check(ncclGroupEnd(), "ncclGroupEnd");
          break;
        case Collective::kScatter:  // nccl-tests': the root sends every part, each rank receives
          nccl_check(ncclGroupStart(), "ncclGroupStart");
          if (me == 0)
            for (int p = 0; p < n; ++p)
              nccl_check(
                  ncclSend(a + static_cast<std::size_t>(p) * part, part, ncclChar, p, nccl, stream),
                  "ncclSend");
          nccl_check(ncclRecv(b, part, ncclChar, 0, nccl, stream), "ncclRecv");
          nccl_check(ncclGroupEnd(), "ncclGroupEnd");
          break;
        case Collective::kSendRecv:  // nccl-tests' sendrecv: the ring
          nccl_check(ncclGroupStart(), "ncclGroupStart");
          nccl_check(ncclSend(a, size, ncclChar, right, nccl, stream), "ncclSend");
          nccl_check(ncclRecv(b, size, ncclChar, left, nccl, stream), "ncclRecv");
          nccl_check(ncclGroupEnd(), "ncclGroupEnd");
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
      case Collective::kAllToAllv:
        comm.all_to_allv_bytes(b, v_tables + 2 * n, v_tables + 3 * n, a, v_tables, v_tables + n,
                               sizeof(float), stream, o);
        break;
      case Collective::kBroadcast:
        comm.broadcast_bytes(b, a, size, 0, stream, o);
        break;
      case Collective::kReduce:
        comm.reduce(reinterpret_cast<float*>(b), reinterpret_cast<float*>(a), count, ReduceOp::kSum,
                    0, stream, o);
        break;
      case Collective::kGather:
        comm.gather_bytes(b, a, part, 0, stream, o);
        break;
      case Collective::kScatter:
        comm.scatter_bytes(b, a, part, 0, stream, o);
        break;
      case Collective::kSendRecv:
        // The recv forks onto the second stream and joins back, so that the call is one span of
        // `stream` (events, graphs) with both halves in flight.
        IRIS_CUDA_CHECK(cudaEventRecord(fork, stream));
        IRIS_CUDA_CHECK(cudaStreamWaitEvent(side, fork));
        ring_comms[edge_comm(me)].send_bytes(a, size, right, stream, o);
        ring_comms[edge_comm(left)].recv_bytes(b, size, left, side, o);
        IRIS_CUDA_CHECK(cudaEventRecord(join, side));
        IRIS_CUDA_CHECK(cudaStreamWaitEvent(stream, join));
        break;
      default:
        break;
    }
  };
  auto runnable = [&](Case k, std::size_t size) {
    const std::size_t bytes = case_bytes(k.collective, size, n);
    if (bytes == 0) return false;
    if (k.collective == Collective::kSendRecv && n < 2) return false;
    if (k.nccl) return true;
    return comm.cannot_run(k.collective, k.algorithm, selection_bytes(k.collective, bytes, n))
        .empty();
  };
  // One call of case k (`size`: case_bytes) checked: sources filled with rank-dependent floats,
  // the destination poisoned, then every float the collective defines on this rank compared on
  // the device. Where parts of a source go to different members (all_to_all(v), scatter), part
  // j of rank r's source holds 100 (r + 1) + j, so that a part taken from the wrong member or
  // the wrong place is counted; elsewhere the whole source holds r + 1. Sums of r + 1 over the
  // ranks are exact in float. Returns {wrong, checked} elements, summed over the ranks.
  struct Checked {
    std::uint64_t wrong = 0, elements = 0;
  };
  auto check = [&](Case k, std::size_t size) -> Checked {
    const Collective c = k.collective;
    const std::size_t floats = size / sizeof(float);
    const std::size_t part = splits(c) ? floats / n : floats;
    const bool by_part =
        c == Collective::kAllToAll || c == Collective::kAllToAllv || c == Collective::kScatter;
    if (by_part)
      fill_parts<<<256, 256, 0, stream>>>(reinterpret_cast<float*>(a), part, n, 100.f * (me + 1),
                                          1.f);
    else
      fill_parts<<<256, 256, 0, stream>>>(reinterpret_cast<float*>(a), floats, 1, float(me + 1),
                                          0.f);
    IRIS_CUDA_CHECK(cudaMemsetAsync(wrong, 0, sizeof(*wrong), stream));
    IRIS_CUDA_CHECK(cudaMemsetAsync(b, 0xff, size, stream));
    if (c == Collective::kAllToAllv) {
      // Equal counts, offsets at the parts: all_to_all's layout. Device-side, so every graph
      // captured at this size reads them; the stream sync below keeps v_host alive for the copy.
      for (int p = 0; p < n; ++p) {
        v_host[p] = v_host[2 * n + p] = static_cast<std::int64_t>(part);
        v_host[n + p] = v_host[3 * n + p] = static_cast<std::int64_t>(part) * p;
      }
      IRIS_CUDA_CHECK(cudaMemcpyAsync(v_tables, v_host.data(), sizeof(std::int64_t) * v_host.size(),
                                      cudaMemcpyHostToDevice, stream));
    }
    enqueue(k, size, 0);
    // What this rank's b must hold: `parts` parts of `span` floats, part j = base + step * j.
    const float sum = static_cast<float>(n * (n + 1) / 2);
    std::size_t span = floats;
    int parts = 1;
    float base = 0, step = 0;
    switch (c) {
      case Collective::kAllReduce:
        base = sum;
        break;
      case Collective::kReduceScatter:
        span = part, base = sum;
        break;
      case Collective::kReduce:  // the root's only
        span = me == 0 ? floats : 0, base = sum;
        break;
      case Collective::kBroadcast:
        base = 1;
        break;
      case Collective::kAllGather:  // part j from member j
        span = part, parts = n, base = 1, step = 1;
        break;
      case Collective::kGather:  // the root's only
        span = me == 0 ? part : 0, parts = n, base = 1, step = 1;
        break;
      case Collective::kScatter:  // the root's part me
        span = part, base = 100.f + me;
        break;
      case Collective::kAllToAll:
      case Collective::kAllToAllv:  // part j: member j's part me
        span = part, parts = n, base = 100.f + me, step = 100;
        break;
      case Collective::kSendRecv:  // the left neighbour's source
        base = float(left + 1);
        break;
      default:
        span = 0;
        break;
    }
    if (span > 0)
      count_wrong_parts<<<256, 256, 0, stream>>>(reinterpret_cast<float*>(b), span, parts, base,
                                                 step, wrong);
    unsigned long long host = 0;
    IRIS_CUDA_CHECK(cudaMemcpyAsync(&host, wrong, sizeof(host), cudaMemcpyDeviceToHost, stream));
    IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
    return {iris::bench::sum_over_ranks(ctx.bootstrap(), host),
            iris::bench::sum_over_ranks(ctx.bootstrap(), span * parts)};
  };

  // Calls of `size` bytes back to back in one sample (and one graph), for the collectives and
  // the memcpy alike, as nccl-tests times a loop of calls: a sample's start (the ranks leave
  // the barrier before it at slightly different times) then weighs the same on both.
  const auto calls_per_sample = [&](std::size_t size) {
    return size <= (std::size_t{1} << 20) ? small_calls : kLargeCalls;
  };

  // The median time of one call that `enqueue_one` queues on `stream` (`size` bytes: how many
  // calls a sample takes), eager or replayed from a graph of a sample's calls; the slowest rank's.
  auto timed = [&](auto&& enqueue_one, std::size_t size, bool graph) {
    example::Repeats repeats;
    repeats.samples = samples;
    repeats.warmup = 2;
    repeats.calls_per_sample = calls_per_sample(size);
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
  for (std::size_t s = std::max<std::size_t>(min_bytes, 1); s <= max_bytes; s *= 2)
    sizes.push_back(s);
  const auto started = std::chrono::steady_clock::now();
  const auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };

  // The ceiling: cudaMemcpy D2D of each size, one rank at a time... all ranks at once when they
  // share the GPU would split it, so rank 0 alone measures it while the others wait.
  std::vector<double> memcpy_gbps(sizes.size(), 0);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    double ms = 0;
    if (leader) {
      example::Repeats r;
      r.samples = samples;
      r.calls_per_sample = calls_per_sample(sizes[i]);
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
  int wrong_cases = 0;
  // best[collective][size index] = (time, algorithm) in graph mode, of the cases checked right:
  // for --tune and the barrier and NCCL tables
  struct Best {
    double ms = 1e30;
    Algorithm algorithm = Algorithm::kAuto;
  };
  std::vector<std::vector<Best>> best(iris::ccl::kCollectiveCount, std::vector<Best>(sizes.size()));
  // nccl_ms[collective][graph][size index]: NCCL's time (0: not measured, or wrong)
  std::vector<std::array<std::vector<double>, 2>> nccl_ms(iris::ccl::kCollectiveCount);
  for (auto& modes : nccl_ms)
    for (auto& by_size : modes) by_size.assign(sizes.size(), 0.0);
  for (const Case& k : cases) {
    const int c = static_cast<int>(k.collective);
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      ++done;
      if (!runnable(k, sizes[i])) continue;
      const std::size_t size = case_bytes(k.collective, sizes[i], n);
      if (leader)
        std::fprintf(stderr, "[ccl_bench] %zu/%zu %s %s %s (%.0f s)\n", done, total,
                     collective_name(k.collective).c_str(), algorithm_name(k).c_str(),
                     human(size).c_str(), seconds());
      const Checked checked = check(k, size);
      if (checked.wrong > 0) {
        ++wrong_cases;
        if (leader)
          std::printf("WRONG: %s %s at %zu bytes: %llu of %llu elements wrong (all ranks)\n",
                      collective_name(k.collective).c_str(), algorithm_name(k).c_str(), size,
                      static_cast<unsigned long long>(checked.wrong),
                      static_cast<unsigned long long>(checked.elements));
      }
      for (bool graph : {false, true}) {
        const double ms = time_ms(k, size, graph, 0);
        if (checked.wrong == 0) {
          if (k.nccl)
            nccl_ms[c][graph][i] = ms;
          else if (graph && ms < best[c][i].ms)
            best[c][i] = {ms, k.algorithm};
        }
        const double algbw = example::gb_per_s(static_cast<double>(size), ms);
        iris::bench::Row row;
        row.text("collective", collective_name(k.collective))
            .text("algorithm", algorithm_name(k))
            .text("mode", graph ? "graph" : "eager")
            .number("size", static_cast<double>(size), "%.0f")
            .number("count", static_cast<double>(size / sizeof(float)), "%.0f")
            .text("type", "float")
            .text("redop", reduces(k.collective) ? "sum" : "none")
            .number("root", rooted(k.collective) ? 0 : -1, "%.0f")
            .number("time_us", ms * 1e3, "%.2f")
            .number("algbw_GBps", algbw, "%.2f")
            .number("busbw_GBps", algbw * bus_factor(k.collective, n), "%.2f")
            .number("wrong", static_cast<double>(checked.wrong), "%.0f");
        if (one_gpu) {
          const double hbm = example::gb_per_s(hbm_bytes(k, static_cast<double>(size), n), ms);
          row.number("hbm_GBps", hbm, "%.1f").number("vs_memcpy", hbm / memcpy_gbps[i], "%.3f");
        }
        if (use_nccl) {
          const double baseline = nccl_ms[static_cast<int>(nccl_twin(k.collective))][graph][i];
          row.number("vs_nccl", baseline > 0 ? baseline / ms : 0.0, "%.3f");
        }
        rows.push_back(row);
      }
    }
  }
  // The fastest iris::ccl algorithm in graph mode against NCCL in graph mode, per size.
  std::vector<iris::bench::Row> against_nccl;
  if (use_nccl)
    for (int c = 0; c < iris::ccl::kCollectiveCount; ++c) {
      const auto collective = static_cast<Collective>(c);
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        const double baseline = nccl_ms[static_cast<int>(nccl_twin(collective))][1][i];
        if (baseline <= 0 || best[c][i].algorithm == Algorithm::kAuto) continue;
        const double factor = bus_factor(collective, n);
        const double size = static_cast<double>(case_bytes(collective, sizes[i], n));
        iris::bench::Row row;
        row.text("collective", collective_name(collective))
            .number("size", size, "%.0f")
            .text("iris_algorithm", std::string(iris::ccl::to_string(best[c][i].algorithm)))
            .number("iris_busbw_GBps", example::gb_per_s(size, best[c][i].ms) * factor, "%.2f")
            .number("nccl_busbw_GBps", example::gb_per_s(size, baseline) * factor, "%.2f")
            .number("iris_over_nccl", baseline / best[c][i].ms, "%.3f");
        against_nccl.push_back(row);
      }
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
      row.number("size", static_cast<double>(case_bytes(Collective::kAllReduce, sizes[i], n)),
                 "%.0f")
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
    if (sweep_size == 0 || !wanted[static_cast<int>(k.collective)] || !runnable(k, sweep_size))
      continue;
    const std::size_t size = case_bytes(k.collective, sweep_size, n);
    const int budget = comm.max_blocks(k.collective);
    const int most = std::min(2 * budget, comm.block_limit(k.collective));
    std::vector<int> counts;
    for (int b = 1; b < budget; b *= 2) counts.push_back(b);
    for (int b : {budget, budget + budget / 2, most})
      if (b <= most && (counts.empty() || b > counts.back())) counts.push_back(b);
    for (int blocks : counts) {
      if (leader)
        std::fprintf(stderr, "[ccl_bench] SM budget %s %d blocks (%.0f s)\n",
                     collective_name(k.collective).c_str(), blocks, seconds());
      const double ms = time_ms(k, size, true, blocks);
      const double algbw = example::gb_per_s(static_cast<double>(size), ms);
      iris::bench::Row row;
      row.text("collective", collective_name(k.collective))
          .text("algorithm", std::string(iris::ccl::to_string(k.algorithm)))
          .number("size", static_cast<double>(size), "%.0f")
          .number("blocks", blocks, "%.0f")
          .number("busbw_GBps", algbw * bus_factor(k.collective, n), "%.2f");
      if (one_gpu) {
        const double hbm = example::gb_per_s(hbm_bytes(k, static_cast<double>(size), n), ms);
        row.number("vs_memcpy", hbm / memcpy_gbps.back(), "%.3f");
      }
      budget_rows.push_back(row);
    }
  }
  const double sweep_s = seconds();
  bool tune_failed = false;

  if (leader) {
    const std::string note =
        "ranks " + std::to_string(n) + (one_gpu ? " sharing one GPU" : " on separate GPUs") +
        ", SM budget " + std::to_string(comm.max_blocks(Collective::kAllReduce)) +
        " blocks (reducing), " + std::to_string(comm.max_blocks(Collective::kAllGather)) +
        " (moving), " + std::to_string(comm_options.threads) + " threads per block, staging " +
        std::to_string(comm_options.staging_bytes >> 10) + " KiB, " + std::to_string(small_calls) +
        " calls per sample up to 1 MiB, " + std::to_string(kLargeCalls) + " above; " + nccl_note;
    iris::bench::report("ccl_bench: collectives (" + std::to_string(n) + " ranks)", rows, json,
                        note, csv);
    iris::bench::report("ccl_bench: cudaMemcpy D2D ceiling (read + write bytes)", ceiling,
                        also(json, ".memcpy.json"), "", also(csv, ".memcpy.csv"));
    if (!latency_rows.empty())
      iris::bench::report(
          "ccl_bench: small all_reduce (graph) against one barrier (graph)", latency_rows,
          also(json, ".latency.json"),
          note +
              "; fastest: the fastest all_reduce algorithm at the size; vs_device_barrier = "
              "time / device_barrier time (the mark: within 2x up to 64 KiB)",
          also(csv, ".latency.csv"));
    iris::bench::report("ccl_bench: busbw against the SM budget", budget_rows,
                        also(json, ".budget.json"), note, also(csv, ".budget.csv"));
    if (use_nccl)
      iris::bench::report("ccl_bench: fastest iris::ccl (graph) against NCCL (graph), busbw",
                          against_nccl, also(json, ".nccl.json"),
                          note + "; all_to_allv against NCCL's all_to_all", also(csv, ".nccl.csv"));
    std::printf("%s\n", nccl_note.c_str());
    if (!tune.empty()) {
      // Entries in the bytes the library selects by (selection_bytes), so that the table picks
      // what was measured here; only collectives with more than one algorithm measured (one
      // entry of the only algorithm selects what the library falls back to anyway, and
      // all_to_allv, whose sizes live on the device, is selected independently of its size).
      std::vector<TuningEntry> measured;
      std::vector<bool> replaced(iris::ccl::kCollectiveCount, false);
      for (int c = 0; c < iris::ccl::kCollectiveCount; ++c) {
        const auto collective = static_cast<Collective>(c);
        replaced[c] = algorithms_of[c] >= 2;
        if (!replaced[c]) continue;
        std::vector<Algorithm> fastest(sizes.size());
        std::vector<std::size_t> bytes(sizes.size());
        for (std::size_t i = 0; i < sizes.size(); ++i) {
          fastest[i] = best[c][i].algorithm;
          bytes[i] = selection_bytes(collective, case_bytes(collective, sizes[i], n), n);
        }
        const std::vector<TuningEntry> runs = tuning_runs(collective, n, fastest, bytes);
        measured.insert(measured.end(), runs.begin(), runs.end());
      }
      // Merged into the file where there is one; one that cannot be read is left as it is and
      // this run's entries go beside it.
      TuningTable old;
      std::string path = tune;
      if (std::filesystem::exists(tune)) {
        try {
          old = TuningTable::from_file(tune);
        } catch (const iris::Error& error) {
          path = tune + ".new";
          std::printf("--tune: cannot merge into %s (%s): writing %s instead\n", tune.c_str(),
                      error.what(), path.c_str());
        }
      }
      const TuningTable table = merged_table(old, n, replaced, measured);
      std::ofstream out(path, std::ios::trunc);
      out << table.to_json();
      out.flush();
      tune_failed = !out;
      if (tune_failed)
        std::printf("--tune: FAILED: cannot write %s\n", path.c_str());
      else
        std::printf(
            "--tune: wrote %zu entries for %d ranks (bytes per member for all_gather, "
            "reduce_scatter, all_to_all, gather, scatter; per call for the others) into %s, "
            "after %zu entries of other team sizes or collectives kept from the %zu it had "
            "(IRIS_CCL_TUNING=%s):\n%s",
            measured.size(), n, path.c_str(), table.entries().size() - measured.size(),
            old.entries().size(), path.c_str(), TuningTable(measured).to_json().c_str());
    }
    std::printf("ccl_bench: the sweep took %.0f s (%zu cases x sizes)\n", sweep_s, total);
  }
  // Every rank knows of the wrong elements (the counts are sums over ranks), only rank 0 of the
  // table it wrote: the exit status is agreed, after every report.
  if (leader && wrong_cases > 0)
    std::printf("ccl_bench: FAILED: %d cases with wrong elements (the WRONG: lines above)\n",
                wrong_cases);
  const bool failed =
      iris::bench::slowest_rank(ctx.bootstrap(), wrong_cases > 0 || tune_failed ? 1.0 : 0.0) > 0;
  IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  IRIS_CUDA_CHECK(cudaStreamSynchronize(side));
  IRIS_CUDA_CHECK(cudaEventDestroy(fork));
  IRIS_CUDA_CHECK(cudaEventDestroy(join));
  baseline.reset();  // the NCCL communicator, after its last call completed
  ctx.barrier();
  return failed ? 1 : 0;
}
