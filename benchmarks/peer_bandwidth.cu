// Bandwidth between every pair of ranks, and with every rank sending at once: the traffic
// patterns of collectives, measured with the device API's block-cooperative put.
//
//   iris-run -n N ./bench_peer_bandwidth [--mib 256] [--samples 11] [--json out.json]
//
// pairs       for each ordered pair (s, d), rank s puts --mib MiB into rank d while the others
//             wait. Next to it, in the same run on rank s, two driver copies of the same bytes,
//             each timed in turn with the put (their ratio is copy time / put time):
//             - the reference: cudaMemcpyPeerAsync between plain cudaMalloc buffers, one on s's
//               GPU and one on d's, with peer access enabled both ways (a copy engine over
//               NVLink). Where the two GPUs cannot reach each other it falls back to a
//               cudaMemcpy D2D within s's GPU, and where s and d share a GPU the peer copy is a
//               D2D copy within it; the table's note says which;
//             - cudaMemcpyAsync (cudaMemcpyDefault) between the heap buffers the put uses; the
//               driver may refuse heap memory mapped for one device (then "n/a").
//             With the ranks on different GPUs, of_450 = put GB/s / 450 GB/s, the NVLink 4 rate
//             per direction of an H100/H200.
// both ways   for each pair {s, d}, s puts into d and d into s at once: GB/s per direction (the
//             slower direction's time), and of_450.
// ring        every rank at once puts --mib MiB into its right neighbour.
// all-to-all  every rank at once puts --mib MiB, split evenly, into all the other ranks (its
//             grid's blocks take the destinations in turn), each piece at the sender's slot.
//
// GB/s = payload bytes / time (1e9 B/s) per sending rank; simultaneous patterns take, for each
// sample, the slowest rank's time (a collective is as fast as its last rank). Each pattern is
// checked once before it is timed: destinations poisoned, every byte compared with the sender's
// source, read through the heap; a wrong pattern prints "WRONG:" and the program exits 1 after
// its tables and JSON. On one GPU shared by the ranks this measures HBM (each byte read and
// written there); on an NVLink machine it measures the links.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "iris/iris.hpp"
#include "report.hpp"

namespace {

// 8 KiB per block and call, launched as one pass (a block per tile): the shape rma_bandwidth
// measures fastest for bulk puts.
constexpr int kThreadsPerBlock = 256;
constexpr std::size_t kFloatsPerTile = kThreadsPerBlock * 8;
constexpr int kMaxRoutes = 64;

/// `count` floats from src + src_offset here to dst + dst_offset on `peer`.
struct Route {
  int peer = 0;
  std::size_t src_offset = 0;
  std::size_t dst_offset = 0;
  std::size_t count = 0;
};

struct Routes {
  int size = 0;
  Route route[kMaxRoutes];
};

/// Block b serves route b % routes.size, its blocks taking the route's tiles in turn, one
/// block-cooperative put per tile (with the one-pass grid of send(), one tile per block).
__global__ void __launch_bounds__(kThreadsPerBlock)
    put_routes(const __grid_constant__ iris::device::Context ctx, float* dst, const float* src,
               const Routes routes) {
  const int n = routes.size;
  const Route& r = routes.route[blockIdx.x % n];
  const std::size_t first_block = blockIdx.x / n;
  const std::size_t blocks = (gridDim.x - blockIdx.x % n + n - 1) / n;
  for (std::size_t start = first_block * kFloatsPerTile; start < r.count;
       start += blocks * kFloatsPerTile) {
    const std::size_t left = r.count - start;
    const std::size_t count = left < kFloatsPerTile ? left : kFloatsPerTile;
    iris::device::put(iris::block{}, ctx, dst + r.dst_offset + start, src + r.src_offset + start,
                      count, r.peer);
  }
}

/// One traffic pattern: what each rank sends. What a rank receives is every route that names it.
struct Pattern {
  std::string name;
  std::vector<Routes> sends;  // by rank
  double bytes_per_sender = 0;
};

Pattern pair_pattern(int world, int from, int to, std::size_t floats) {
  Pattern p{"pair", std::vector<Routes>(world), static_cast<double>(floats * sizeof(float))};
  p.sends[from].size = 1;
  p.sends[from].route[0] = Route{to, 0, 0, floats};
  return p;
}

/// a puts into b and b into a, at once (each into the other's destination, at offset 0).
Pattern both_ways_pattern(int world, int a, int b, std::size_t floats) {
  Pattern p{"pair both ways", std::vector<Routes>(world),
            static_cast<double>(floats * sizeof(float))};
  p.sends[a].size = 1;
  p.sends[a].route[0] = Route{b, 0, 0, floats};
  p.sends[b].size = 1;
  p.sends[b].route[0] = Route{a, 0, 0, floats};
  return p;
}

Pattern ring_pattern(int world, std::size_t floats) {
  Pattern p{"ring", std::vector<Routes>(world), static_cast<double>(floats * sizeof(float))};
  for (int r = 0; r < world; ++r) {
    p.sends[r].size = 1;
    p.sends[r].route[0] = Route{(r + 1) % world, 0, 0, floats};
  }
  return p;
}

/// Rank r's piece for rank d sits at d * piece in r's source and lands at r * piece in d's
/// destination.
Pattern all_to_all_pattern(int world, std::size_t floats) {
  const std::size_t piece = floats / (world - 1) / 4 * 4;  // whole 16-byte vectors
  Pattern p{"all-to-all", std::vector<Routes>(world),
            static_cast<double>(piece * (world - 1) * sizeof(float))};
  for (int r = 0; r < world; ++r)
    for (int d = 0; d < world; ++d)
      if (d != r) {
        Routes& routes = p.sends[r];
        routes.route[routes.size++] = Route{d, d * piece, r * piece, piece};
      }
  return p;
}

/// What the reference copy of a pair was (the same on every rank: rank `from` broadcasts it).
enum class Reference : int {
  kFailed = 0,         ///< the driver refused it (the message says why): no ratio
  kPeer = 1,           ///< cudaMemcpyPeerAsync between the two GPUs, peer access enabled
  kSameGpu = 2,        ///< both ranks on one GPU: cudaMemcpyPeerAsync within it, a D2D copy
  kNoPeerAccess = 3,   ///< the GPUs cannot reach each other: cudaMemcpy D2D within from's GPU
  kPeerNotVisible = 4  ///< from's process cannot see to's GPU: cudaMemcpy D2D within from's
};

const char* reference_note(Reference r) {
  switch (r) {
    case Reference::kPeer:
      return "cudaMemcpyPeerAsync between cudaMalloc buffers on the two GPUs (peer access "
             "enabled): a copy engine over the link";
    case Reference::kSameGpu:
      return "both ranks on one GPU: cudaMemcpyPeerAsync between two cudaMalloc buffers of it, "
             "which is a D2D copy (HBM read and write), not a link figure";
    case Reference::kNoPeerAccess:
      return "the GPUs cannot reach each other (cudaDeviceCanAccessPeer 0): cudaMemcpy D2D "
             "within the sender's GPU instead, not a link figure";
    case Reference::kPeerNotVisible:
      return "the sender's process cannot see the receiver's GPU: cudaMemcpy D2D within the "
             "sender's GPU instead, not a link figure";
    default:
      return "the driver refused the copy: no reference";
  }
}

/// The driver's copies of one pair, measured on rank `from` (zeros elsewhere, until broadcast).
struct DriverCopies {
  double reference_gbps = 0;
  double reference_ratio = 0;  ///< reference time / put time, timed in turn
  double reference = static_cast<double>(Reference::kFailed);  ///< a Reference, as a double
  double heap_gbps = 0;   ///< cudaMemcpyAsync between the heap buffers the put uses
  double heap_ratio = 0;  ///< its time / put time, timed in turn
};

class Bench {
 public:
  Bench(iris::Context& ctx, std::size_t floats, int samples)
      : ctx_(ctx),
        samples_(samples),
        // Twice the payload: all-to-all pieces sit at up to world / (world - 1) x payload.
        src_(ctx.uniform<float>(2 * floats, -1.0f, 1.0f, 2000 + ctx.rank())),
        dst_(ctx.empty<float>(src_.size())) {
    IRIS_CUDA_CHECK(cudaGetDevice(&device_));
    IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    IRIS_CUDA_CHECK(cudaMalloc(&wrong_, sizeof(unsigned long long)));
  }
  ~Bench() {
    cudaFree(plain_src_);
    cudaFree(wrong_);
    cudaStreamDestroy(stream_);
  }

  /// Runs `p` once into poisoned destinations; the number of wrong floats on all ranks
  /// (collective).
  double check(const Pattern& p) {
    IRIS_CUDA_CHECK(cudaMemsetAsync(dst_.data(), 0xff, dst_.bytes(), stream_));
    IRIS_CUDA_CHECK(cudaStreamSynchronize(stream_));
    ctx_.barrier();
    send(p);
    IRIS_CUDA_CHECK(cudaStreamSynchronize(stream_));
    ctx_.barrier();
    IRIS_CUDA_CHECK(cudaMemsetAsync(wrong_, 0, sizeof(unsigned long long), stream_));
    for (int sender = 0; sender < ctx_.world_size(); ++sender) {
      const Routes& routes = p.sends[sender];
      for (int k = 0; k < routes.size; ++k) {
        const Route& r = routes.route[k];
        if (r.peer != ctx_.rank()) continue;
        iris::bench::count_mismatches<<<2 * example::sm_count(), 256, 0, stream_>>>(
            reinterpret_cast<const unsigned*>(dst_.data() + r.dst_offset),
            reinterpret_cast<const unsigned*>(src_.on(sender) + r.src_offset), r.count, 0, 0u,
            wrong_);
        IRIS_CUDA_CHECK(cudaGetLastError());
      }
    }
    unsigned long long wrong = 0;
    IRIS_CUDA_CHECK(
        cudaMemcpyAsync(&wrong, wrong_, sizeof(wrong), cudaMemcpyDeviceToHost, stream_));
    IRIS_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::vector<double> all(ctx_.world_size());
    const double mine = static_cast<double>(wrong);
    ctx_.bootstrap().allgather(&mine, all.data(), sizeof(double));
    double total = 0;
    for (const double w : all) total += w;
    return total;
  }

  /// Milliseconds of `p`, per sample the slowest sender's (collective). Every rank starts each
  /// sample from a device barrier, so the senders begin together.
  std::vector<double> time(const Pattern& p) {
    example::Repeats repeats;
    repeats.samples = samples_;
    repeats.warmup = 1;
    std::vector<double> mine = example::time_calls_ms(
        stream_, repeats, [&](long) { send(p); }, [&] { ctx_.device_barrier(stream_); });
    std::vector<double> all(mine.size() * ctx_.world_size());
    ctx_.bootstrap().allgather(mine.data(), all.data(), mine.size() * sizeof(double));
    std::vector<double> slowest(mine.size(), 0);
    for (int r = 0; r < ctx_.world_size(); ++r)
      if (p.sends[r].size > 0)
        for (std::size_t s = 0; s < mine.size(); ++s)
          slowest[s] = std::max(slowest[s], all[r * mine.size() + s]);
    return slowest;
  }

  /// The driver's copies of the pair pattern `p` (rank `from` into rank `to`), each timed in
  /// turn with the put on rank `from` while the others wait: the reference (plain cudaMalloc
  /// buffers, cudaMemcpyPeerAsync) and the copy between the heap buffers. `devices`: each rank's
  /// GPU as this process's ordinal (iris::bench::device_of_each_rank). Zeros on the other ranks.
  DriverCopies against_driver_copies(const Pattern& p, int from, int to,
                                     const std::vector<int>& devices) {
    DriverCopies copies;
    if (ctx_.rank() != from) return copies;
    const std::size_t bytes = static_cast<std::size_t>(p.bytes_per_sender);
    try {
      const auto [gbps, ratio] = copy_and_ratio(p, [&] {
        IRIS_CUDA_CHECK(
            cudaMemcpyAsync(dst_.on(to), src_.data(), bytes, cudaMemcpyDefault, stream_));
      });
      copies.heap_gbps = gbps;
      copies.heap_ratio = ratio;
    } catch (const iris::Error& error) {  // a platform that refuses this copy: no figure
      std::printf("heap copy %d -> %d (cudaMemcpyAsync, cudaMemcpyDefault): %s\n", from, to,
                  error.what());
    }
    float* plain_dst = nullptr;
    int dst_device = device_;
    try {
      Reference kind = Reference::kFailed;
      const int peer_device = devices[to];
      if (peer_device < 0) {
        kind = Reference::kPeerNotVisible;
      } else if (peer_device == device_) {
        kind = Reference::kSameGpu;
      } else {
        int there = 0, back = 0;
        IRIS_CUDA_CHECK(cudaDeviceCanAccessPeer(&there, device_, peer_device));
        IRIS_CUDA_CHECK(cudaDeviceCanAccessPeer(&back, peer_device, device_));
        kind = there && back ? Reference::kPeer : Reference::kNoPeerAccess;
      }
      if (kind == Reference::kPeer) {
        iris::bench::enable_peer_access(device_, peer_device);
        iris::bench::enable_peer_access(peer_device, device_);
        dst_device = peer_device;
      }
      IRIS_CUDA_CHECK(cudaSetDevice(dst_device));
      IRIS_CUDA_CHECK(cudaMalloc(&plain_dst, bytes));
      IRIS_CUDA_CHECK(cudaSetDevice(device_));
      if (plain_src_ == nullptr) {
        IRIS_CUDA_CHECK(cudaMalloc(&plain_src_, bytes));
        IRIS_CUDA_CHECK(cudaMemset(plain_src_, 0x3c, bytes));
      }
      const auto [gbps, ratio] = copy_and_ratio(p, [&] {
        IRIS_CUDA_CHECK(
            cudaMemcpyPeerAsync(plain_dst, dst_device, plain_src_, device_, bytes, stream_));
      });
      copies.reference_gbps = gbps;
      copies.reference_ratio = ratio;
      copies.reference = static_cast<double>(kind);
    } catch (const iris::Error& error) {
      std::printf("reference copy %d -> %d (cudaMemcpyPeerAsync, cudaMalloc buffers): %s\n", from,
                  to, error.what());
    }
    if (plain_dst != nullptr) {
      (void)cudaSetDevice(dst_device);
      cudaFree(plain_dst);
    }
    (void)cudaSetDevice(device_);
    return copies;
  }

 private:
  /// The GB/s of `copy()` (which queues one copy of p's bytes on stream_), and the median of
  /// copy time / put time with the two timed in turn, one sample each, samples_ times.
  template <class Copy>
  std::pair<double, double> copy_and_ratio(const Pattern& p, Copy&& copy) {
    example::Repeats one;
    one.samples = 1;
    one.warmup = 1;
    std::vector<double> copy_ms, ratios;
    for (int s = 0; s < samples_; ++s) {
      const double copied = example::time_calls_ms(stream_, one, [&](long) { copy(); }).front();
      const double put = example::time_calls_ms(stream_, one, [&](long) { send(p); }).front();
      copy_ms.push_back(copied);
      ratios.push_back(copied / put);
    }
    return {example::gb_per_s(p.bytes_per_sender, example::summarize(copy_ms).median),
            example::summarize(ratios).median};
  }

  void send(const Pattern& p) {
    const Routes& routes = p.sends[ctx_.rank()];
    if (routes.size == 0) return;
    std::size_t longest = 0;
    for (int r = 0; r < routes.size; ++r) longest = std::max(longest, routes.route[r].count);
    const auto blocks = static_cast<unsigned>(
        routes.size * std::max<std::size_t>(1, (longest + kFloatsPerTile - 1) / kFloatsPerTile));
    put_routes<<<blocks, kThreadsPerBlock, 0, stream_>>>(ctx_.device(), dst_.data(), src_.data(),
                                                         routes);
    IRIS_CUDA_CHECK(cudaGetLastError());
  }

  iris::Context& ctx_;
  int samples_;
  iris::Buffer<float> src_;
  iris::Buffer<float> dst_;
  int device_ = 0;
  cudaStream_t stream_{};
  unsigned long long* wrong_ = nullptr;
  float* plain_src_ = nullptr;  ///< the reference's source: a cudaMalloc buffer on this GPU
};

/// The NVLink 4 rate per direction of one H100/H200 in an 8-GPU board (18 links x 25 GB/s).
constexpr double kLinkGBps = 450;

}  // namespace

int main(int argc, char** argv) {
  if (!example::gpu_visible("peer_bandwidth")) return 0;
  const auto mib = static_cast<std::size_t>(example::number_arg(argc, argv, "--mib", 256));
  const int samples = static_cast<int>(example::number_arg(argc, argv, "--samples", 11));
  const std::string json_path = iris::bench::json_path_from_args(argc, argv);
  try {
    iris::ContextOptions options;
    options.heap_size = 4 * (mib << 20) + (std::size_t{64} << 20);
    auto ctx = iris::Context::from_env(options);
    const int world = ctx.world_size();
    if (world < 2 || world > kMaxRoutes) {
      std::fprintf(stderr, "peer_bandwidth: needs 2 to %d ranks (iris-run -n 2 ...)\n", kMaxRoutes);
      return 1;
    }
    const std::size_t floats = (mib << 20) / sizeof(float);
    Bench bench(ctx, floats, samples);
    const std::vector<int> devices = iris::bench::device_of_each_rank(ctx.bootstrap());
    const bool one_gpu = std::all_of(devices.begin(), devices.end(),
                                     [&](int d) { return d >= 0 && d == devices[0]; });
    // Two ranks whose traffic crosses a link: both GPUs visible here, and not the same one.
    const auto crosses_link = [&](int a, int b) {
      return devices[a] >= 0 && devices[b] >= 0 && devices[a] != devices[b];
    };
    bool every_rank_own_gpu = true;
    for (int a = 0; a < world; ++a)
      for (int b = 0; b < a; ++b) every_rank_own_gpu &= crosses_link(a, b);
    int failures = 0;
    // Checks `p` once; a wrong pattern is reported by rank 0 and counted.
    const auto check = [&](const Pattern& p, const std::string& label) {
      const double wrong = bench.check(p);
      if (wrong == 0) return;
      ++failures;
      if (ctx.rank() == 0)
        std::printf("WRONG: peer_bandwidth %s: %.0f floats differ from the sender's source\n",
                    label.c_str(), wrong);
    };
    std::vector<iris::bench::Row> json_rows;

    // Pairs: a matrix of put GB/s, of its ratio to each driver copy and of its fraction of the
    // link's rate.
    std::vector<iris::bench::Row> put_rows, reference_rows, heap_rows, link_rows;
    std::vector<bool> references_seen(5, false);
    bool any_link = false;
    for (int from = 0; from < world; ++from) {
      iris::bench::Row put_row, reference_row, heap_row, link_row;
      for (iris::bench::Row* row : {&put_row, &reference_row, &heap_row, &link_row})
        row->text("from \\ to", std::to_string(from));
      for (int to = 0; to < world; ++to) {
        const std::string column = std::to_string(to);
        if (to == from) {
          for (iris::bench::Row* row : {&put_row, &reference_row, &heap_row, &link_row})
            row->text(column, "-");
          continue;
        }
        const Pattern p = pair_pattern(world, from, to, floats);
        check(p, "pair " + std::to_string(from) + " -> " + column);
        const double gbps =
            example::gb_per_s(p.bytes_per_sender, example::summarize(bench.time(p)).median);
        ctx.barrier();
        DriverCopies copies = bench.against_driver_copies(p, from, to, devices);
        ctx.bootstrap().broadcast(&copies, sizeof(copies), from);
        const auto reference = static_cast<Reference>(static_cast<int>(copies.reference));
        references_seen[static_cast<int>(reference)] = true;
        put_row.number(column, gbps, "%.0f");
        const auto ratio_cell = [&](iris::bench::Row& row, double ratio) {
          if (ratio > 0) {
            row.number(column, ratio, "%.2f");
          } else {
            row.text(column, "n/a");
          }
        };
        ratio_cell(reference_row, copies.reference_ratio);
        ratio_cell(heap_row, copies.heap_ratio);
        iris::bench::Row json_row;
        json_row.text("pattern", "pair")
            .number("from", from, "%.0f")
            .number("to", to, "%.0f")
            .number("GBps", gbps)
            .text("reference", reference == Reference::kPeer      ? "cudaMemcpyPeer"
                               : reference == Reference::kSameGpu ? "cudaMemcpyPeer (one GPU: D2D)"
                               : reference == Reference::kFailed  ? "none"
                                                                  : "cudaMemcpy D2D (no peer path)")
            .number("reference_GBps", copies.reference_gbps)
            .number("ratio_to_reference", copies.reference_ratio)
            .number("driver_copy_GBps", copies.heap_gbps)
            .number("ratio_to_driver_copy", copies.heap_ratio);
        if (crosses_link(from, to)) {
          any_link = true;
          link_row.number(column, gbps / kLinkGBps, "%.2f");
          json_row.number("of_450", gbps / kLinkGBps);
          if (reference == Reference::kPeer)
            json_row.number("reference_of_450", copies.reference_gbps / kLinkGBps);
        } else {
          link_row.text(column, "same GPU");
        }
        json_rows.push_back(json_row);
      }
      put_rows.push_back(put_row);
      reference_rows.push_back(reference_row);
      heap_rows.push_back(heap_row);
      link_rows.push_back(link_row);
    }

    // Both ways at once, for each pair: GB/s per direction (the slower direction's time).
    std::vector<std::vector<double>> both(world, std::vector<double>(world, 0));
    for (int a = 0; a < world; ++a) {
      for (int b = a + 1; b < world; ++b) {
        const Pattern p = both_ways_pattern(world, a, b, floats);
        check(p, "both ways " + std::to_string(a) + " <-> " + std::to_string(b));
        const double gbps =
            example::gb_per_s(p.bytes_per_sender, example::summarize(bench.time(p)).median);
        both[a][b] = both[b][a] = gbps;
        iris::bench::Row json_row;
        json_row.text("pattern", "pair both ways")
            .number("from", a, "%.0f")
            .number("to", b, "%.0f")
            .number("GBps_per_direction", gbps)
            .number("GBps_both_directions", 2 * gbps);
        if (crosses_link(a, b)) json_row.number("of_450", gbps / kLinkGBps);
        json_rows.push_back(json_row);
      }
    }
    std::vector<iris::bench::Row> both_rows;
    for (int a = 0; a < world; ++a) {
      iris::bench::Row row;
      row.text("rank", std::to_string(a));
      for (int b = 0; b < world; ++b) {
        const std::string column = std::to_string(b);
        if (a == b) {
          row.text(column, "-");
        } else if (crosses_link(a, b)) {
          row.text(column, [&] {
            char cell[32];
            std::snprintf(cell, sizeof(cell), "%.0f (%.2f)", both[a][b], both[a][b] / kLinkGBps);
            return std::string(cell);
          }());
        } else {
          row.number(column, both[a][b], "%.0f");
        }
      }
      both_rows.push_back(row);
    }

    // Everyone at once.
    std::vector<iris::bench::Row> together_rows;
    for (const Pattern& p : {ring_pattern(world, floats), all_to_all_pattern(world, floats)}) {
      check(p, p.name);
      const double ms = example::summarize(bench.time(p)).median;
      const double per_rank = example::gb_per_s(p.bytes_per_sender, ms);
      iris::bench::Row row;
      row.text("pattern", p.name)
          .number("MiB per rank", p.bytes_per_sender / (1 << 20), "%.0f")
          .number("GB/s per rank", per_rank, "%.0f")
          .number("GB/s all ranks", per_rank * world, "%.0f");
      iris::bench::Row json_row;
      json_row.text("pattern", p.name)
          .number("world", world, "%.0f")
          .number("bytes_per_rank", p.bytes_per_sender, "%.0f")
          .number("GBps_per_rank", per_rank)
          .number("GBps_all_ranks", per_rank * world);
      if (every_rank_own_gpu) {
        row.number("of 450 per rank", per_rank / kLinkGBps, "%.2f");
        json_row.number("of_450", per_rank / kLinkGBps);
      }
      together_rows.push_back(row);
      json_rows.push_back(json_row);
    }

    if (ctx.rank() == 0) {
      const std::string where =
          one_gpu ? "all ranks share one GPU: every byte is read and written in the same HBM, "
                    "whose bandwidth all senders share."
          : every_rank_own_gpu ? "ranks on different GPUs: NVLink."
                               : "some ranks share a GPU: their pairs move data within its HBM, "
                                 "the others cross NVLink.";
      const std::string convention = std::to_string(mib) +
                                     " MiB per sender, block-cooperative put, one " +
                                     std::to_string(kFloatsPerTile * sizeof(float) / 1024) +
                                     " KiB tile per block, " + std::to_string(samples) +
                                     " samples, median (simultaneous patterns: slowest rank per "
                                     "sample). " +
                                     where;
      std::string reference_notes;
      for (int r = 0; r < static_cast<int>(references_seen.size()); ++r)
        if (references_seen[r])
          reference_notes += std::string(reference_notes.empty() ? "" : "; ") +
                             reference_note(static_cast<Reference>(r));
      iris::bench::print_table("put, rank 'from' -> rank 'to', GB/s", put_rows, convention);
      iris::bench::print_table(
          "put / reference copy (cudaMemcpyPeerAsync, cudaMalloc buffers), time ratio timed in "
          "turn",
          reference_rows, "reference: " + reference_notes);
      iris::bench::print_table(
          "put / driver's copy of the heap buffers (cudaMemcpyAsync, same buffers as the put), "
          "time ratio timed in turn",
          heap_rows,
          "n/a: the driver refused heap memory (its mapping gives access to its own GPU only)");
      if (any_link) {
        iris::bench::print_table("put GB/s / 450 GB/s (NVLink 4 per direction, H100/H200)",
                                 link_rows,
                                 "'same GPU': those two ranks share a GPU, so no link is crossed");
      } else {
        std::printf(
            "\nno fraction of 450 GB/s (NVLink 4 per direction): no pair crosses a link here\n");
      }
      iris::bench::print_table(
          "both ways at once, GB/s per direction" +
              std::string(any_link ? " (fraction of 450 GB/s where a link is crossed)" : ""),
          both_rows, "each pair {a, b}: a puts into b while b puts into a; the slower one's time");
      iris::bench::print_table("every rank sending at once", together_rows);
      iris::bench::write_json(json_path, "peer_bandwidth", json_rows,
                              convention + " Reference: " + reference_notes + ".");
    }
    if (failures != 0) {
      if (ctx.rank() == 0)
        std::printf("WRONG: peer_bandwidth: %d patterns delivered wrong data\n", failures);
      return 1;
    }
    return 0;
  } catch (const iris::Error& error) {
    std::fprintf(stderr, "peer_bandwidth: %s\n", error.what());
    return 1;
  }
}
