// Bandwidth between every pair of ranks, and with every rank sending at once: the traffic
// patterns of collectives, measured with the device API's block-cooperative put.
//
//   iris-run -n N ./bench_peer_bandwidth [--mib 256] [--samples 11] [--json out.json]
//
// pairs       for each ordered pair (s, d), rank s puts --mib MiB into rank d while the others
//             wait; next to it, the driver's copy of the same bytes between the same buffers
//             (cudaMemcpyAsync from rank s), and their ratio (the two timed in turn).
// ring        every rank at once puts --mib MiB into its right neighbour.
// all-to-all  every rank at once puts --mib MiB, split evenly, into all the other ranks (its
//             grid's blocks take the destinations in turn), each piece at the sender's slot.
//
// GB/s = payload bytes / time (1e9 B/s) per sending rank; simultaneous patterns take, for each
// sample, the slowest rank's time (a collective is as fast as its last rank). Each pattern is
// checked once before it is timed: destinations poisoned, every byte compared with the sender's
// source, read through the heap. On one GPU shared by the ranks this measures HBM (each byte read
// and written there); on an NVLink machine it measures the links.
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

class Bench {
 public:
  Bench(iris::Context& ctx, std::size_t floats, int samples)
      : ctx_(ctx),
        samples_(samples),
        // Twice the payload: all-to-all pieces sit at up to world / (world - 1) x payload.
        src_(ctx.uniform<float>(2 * floats, -1.0f, 1.0f, 2000 + ctx.rank())),
        dst_(ctx.empty<float>(src_.size())) {
    IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    IRIS_CUDA_CHECK(cudaMalloc(&wrong_, sizeof(unsigned long long)));
  }
  ~Bench() {
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

  /// The driver's copy of rank `from`'s source into rank `to`'s destination (a copy engine
  /// between GPUs, a kernel on the SMs within one GPU): its GB/s, and
  /// the median of copy time / put time with the two timed in turn on rank `from` while the
  /// others wait. Returns {0, 0} on the other ranks.
  std::pair<double, double> against_driver_copy(const Pattern& p, int from, int to) {
    if (ctx_.rank() != from) return {0, 0};
    try {
      return driver_copy_and_ratio(p, to);
    } catch (const iris::Error& error) {  // a platform that refuses this copy: no baseline
      std::printf("driver copy %d -> %d: %s\n", from, to, error.what());
      return {0, 0};
    }
  }

 private:
  std::pair<double, double> driver_copy_and_ratio(const Pattern& p, int to) {
    const std::size_t bytes = static_cast<std::size_t>(p.bytes_per_sender);
    example::Repeats one;
    one.samples = 1;
    one.warmup = 1;
    std::vector<double> copy_ms, ratios;
    for (int s = 0; s < samples_; ++s) {
      const double copy = example::time_calls_ms(stream_, one, [&](long) {
                            IRIS_CUDA_CHECK(cudaMemcpyAsync(dst_.on(to), src_.data(), bytes,
                                                            cudaMemcpyDefault, stream_));
                          }).front();
      const double put = example::time_calls_ms(stream_, one, [&](long) { send(p); }).front();
      copy_ms.push_back(copy);
      ratios.push_back(copy / put);
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
  cudaStream_t stream_{};
  unsigned long long* wrong_ = nullptr;
};

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
    int failures = 0;
    std::vector<iris::bench::Row> json_rows;

    // Pairs: a matrix of put GB/s and one of the ratio to the driver's copy.
    std::vector<iris::bench::Row> put_rows, ratio_rows;
    for (int from = 0; from < world; ++from) {
      iris::bench::Row put_row, ratio_row;
      put_row.text("from \\ to", std::to_string(from));
      ratio_row.text("from \\ to", std::to_string(from));
      for (int to = 0; to < world; ++to) {
        if (to == from) {
          put_row.text(std::to_string(to), "-");
          ratio_row.text(std::to_string(to), "-");
          continue;
        }
        const Pattern p = pair_pattern(world, from, to, floats);
        failures += bench.check(p) != 0;
        const double gbps =
            example::gb_per_s(p.bytes_per_sender, example::summarize(bench.time(p)).median);
        ctx.barrier();
        auto [copy_gbps, ratio] = bench.against_driver_copy(p, from, to);
        double shared[2] = {copy_gbps, ratio};
        ctx.bootstrap().broadcast(shared, sizeof(shared), from);
        put_row.number(std::to_string(to), gbps, "%.0f");
        if (shared[1] > 0) {
          ratio_row.number(std::to_string(to), shared[1], "%.2f");
        } else {
          ratio_row.text(std::to_string(to), "n/a");
        }
        json_rows.push_back(iris::bench::Row()
                                .text("pattern", "pair")
                                .number("from", from, "%.0f")
                                .number("to", to, "%.0f")
                                .number("GBps", gbps)
                                .number("driver_copy_GBps", shared[0])
                                .number("ratio_to_driver_copy", shared[1]));
      }
      put_rows.push_back(put_row);
      ratio_rows.push_back(ratio_row);
    }

    // Everyone at once.
    std::vector<iris::bench::Row> together_rows;
    for (const Pattern& p : {ring_pattern(world, floats), all_to_all_pattern(world, floats)}) {
      failures += bench.check(p) != 0;
      const double ms = example::summarize(bench.time(p)).median;
      const double per_rank = example::gb_per_s(p.bytes_per_sender, ms);
      iris::bench::Row row;
      row.text("pattern", p.name)
          .number("MiB per rank", p.bytes_per_sender / (1 << 20), "%.0f")
          .number("GB/s per rank", per_rank, "%.0f")
          .number("GB/s all ranks", per_rank * world, "%.0f");
      together_rows.push_back(row);
      json_rows.push_back(iris::bench::Row()
                              .text("pattern", p.name)
                              .number("world", world, "%.0f")
                              .number("bytes_per_rank", p.bytes_per_sender, "%.0f")
                              .number("GBps_per_rank", per_rank)
                              .number("GBps_all_ranks", per_rank * world));
    }

    if (ctx.rank() == 0) {
      const bool one_gpu = std::all_of(devices.begin(), devices.end(),
                                       [&](int d) { return d >= 0 && d == devices[0]; });
      const std::string where =
          one_gpu ? "all ranks share one GPU: every byte is read and written in the same HBM, "
                    "whose bandwidth all senders share."
                  : "ranks on different GPUs: NVLink.";
      const std::string convention = std::to_string(mib) +
                                     " MiB per sender, block-cooperative put, one " +
                                     std::to_string(kFloatsPerTile * sizeof(float) / 1024) +
                                     " KiB tile per block, " + std::to_string(samples) +
                                     " samples, median (simultaneous patterns: slowest rank per "
                                     "sample). " +
                                     where;
      iris::bench::print_table("put, rank 'from' -> rank 'to', GB/s", put_rows, convention);
      iris::bench::print_table(
          "put / driver's copy (cudaMemcpyAsync, same buffers), time ratio timed in turn",
          ratio_rows);
      iris::bench::print_table("every rank sending at once", together_rows);
      iris::bench::write_json(json_path, "peer_bandwidth", json_rows, convention);
    }
    if (failures != 0) {
      std::printf("peer_bandwidth: %d patterns delivered wrong data\n", failures);
      return 1;
    }
    return 0;
  } catch (const iris::Error& error) {
    std::fprintf(stderr, "peer_bandwidth: %s\n", error.what());
    return 1;
  }
}
