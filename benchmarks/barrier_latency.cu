// Cross-rank barrier latency at the job's world size: the block-level and grid-level device
// barriers inside one kernel, a barrier object's channel (whole sync, and split into arrive +
// wait), and the host's ctx.device_barrier(stream) both as plain launches and replayed from a
// CUDA graph.
//
//   iris-run -n 8 ./bench_barrier_latency [--barriers 10000] [--launches 5] [--json out.json]
//                                         [--placements 8]
//
// --placements N adds the sync of each channel of an N-channel barrier object: the same code
// on lines at N different addresses, to tell the cost of the code from that of where its lines
// lie (with ranks sharing one GPU, which part of the L2 cache a line lands in shows).
//
// In-kernel barriers are timed on the GPU's global timer around batches of kBarriersPerBatch
// (the first batch of every launch is a warm-up that absorbs the ranks' start skew);
// device_barrier is timed with CUDA events around a sample of many calls. Every rank measures;
// the table shows the slowest rank's median (a barrier is as slow as its last arrival).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "iris/iris.hpp"
#include "report.hpp"

namespace {

constexpr int kBarriersPerBatch = 100;
constexpr int kThreadsPerBlock = 128;

// ---- the barriers measured ----------------------------------------------------------------

/// barrier(G{}, ctx): the world barriers of a block or the grid.
template <class G>
struct World {
  __device__ void operator()(const iris::device::Context& ctx) const {
    iris::device::barrier(G{}, ctx);
  }
};

/// A barrier object's channel (0 unless given), by the block: sync, or arrive then wait (split
/// phases).
template <bool kSplit>
struct Object {
  iris::device::Barriers bars;
  int channel = 0;
  __device__ void operator()(const iris::device::Context& ctx) const {
    if constexpr (kSplit) {
      const auto token = iris::device::arrive(iris::block{}, ctx, bars, channel);
      iris::device::wait(iris::block{}, ctx, bars, token);
    } else {
      iris::device::sync(iris::block{}, ctx, bars, channel);
    }
  }
};

// ---- correctness first: a barrier must order writes before it with reads after it ----------

/// Every rank writes `round` into its own slot on every rank.
__device__ void publish_round(const iris::device::Context& ctx, std::uint64_t* slots,
                              std::uint64_t round) {
  for (int r = 0; r < ctx.world_size(); ++r) iris::device::store(ctx, slots + ctx.rank(), round, r);
}

/// How many of this rank's slots do not hold `round` yet.
__device__ unsigned count_stale(const iris::device::Context& ctx, const std::uint64_t* slots,
                                std::uint64_t round) {
  unsigned stale = 0;
  for (int r = 0; r < ctx.world_size(); ++r) stale += slots[r] != round;
  return stale;
}

/// `rounds` rounds of: block 0 publishes, barrier, the grid's last block counts stale slots (so
/// a grid barrier must order across blocks too), barrier (no one publishes the next round while
/// another still reads this one).
template <class Meet>
__global__ void check_in_kernel(const __grid_constant__ iris::device::Context ctx, Meet meet,
                                std::uint64_t* slots, std::uint64_t first_round, int rounds,
                                unsigned* stale) {
  const bool lead = threadIdx.x == 0;
  for (std::uint64_t round = first_round; round < first_round + rounds; ++round) {
    if (lead && blockIdx.x == 0) publish_round(ctx, slots, round);
    meet(ctx);
    if (lead && blockIdx.x == gridDim.x - 1) *stale += count_stale(ctx, slots, round);
    meet(ctx);
  }
}

__global__ void publish(const __grid_constant__ iris::device::Context ctx, std::uint64_t* slots,
                        std::uint64_t round) {
  publish_round(ctx, slots, round);
}

__global__ void check(const __grid_constant__ iris::device::Context ctx, const std::uint64_t* slots,
                      std::uint64_t round, unsigned* stale) {
  *stale += count_stale(ctx, slots, round);
}

// ---- timing -----------------------------------------------------------------------------------

/// `barriers` back-to-back barriers `meet`; thread 0 of block 0 times each batch.
template <class Meet>
__global__ void __launch_bounds__(kThreadsPerBlock)
    barrier_loop(const __grid_constant__ iris::device::Context ctx, Meet meet, int barriers,
                 std::uint64_t* batch_ns) {
  const bool timer = blockIdx.x == 0 && threadIdx.x == 0;
  std::uint64_t start = 0;
  for (int i = 0; i < barriers; ++i) {
    if (i % kBarriersPerBatch == 0) start = iris::bench::device_clock_ns();
    meet(ctx);
    if (timer && (i + 1) % kBarriersPerBatch == 0)
      batch_ns[i / kBarriersPerBatch] = iris::bench::device_clock_ns() - start;
  }
}

/// Per-barrier microseconds of `launches` launches (after one warm-up launch) of barrier_loop
/// with `blocks` blocks, over this rank's batches.
template <class Meet>
example::Stats in_kernel(iris::Context& ctx, Meet meet, int blocks, int barriers, int launches) {
  const int batches = barriers / kBarriersPerBatch;
  std::uint64_t* batch_ns = nullptr;
  IRIS_CUDA_CHECK(cudaMalloc(&batch_ns, sizeof(std::uint64_t) * batches));
  std::vector<double> us;
  for (int launch = 0; launch <= launches; ++launch) {
    ctx.barrier();
    barrier_loop<<<blocks, kThreadsPerBlock>>>(ctx.device(), meet, barriers, batch_ns);
    IRIS_CUDA_CHECK(cudaGetLastError());
    ctx.barrier();
    if (launch == 0) continue;
    std::vector<std::uint64_t> ns(batches);
    IRIS_CUDA_CHECK(
        cudaMemcpy(ns.data(), batch_ns, sizeof(std::uint64_t) * batches, cudaMemcpyDeviceToHost));
    for (int b = 1; b < batches; ++b)
      us.push_back(static_cast<double>(ns[b]) / 1e3 / kBarriersPerBatch);
  }
  IRIS_CUDA_CHECK(cudaFree(batch_ns));
  return example::summarize(us);
}

/// Per-barrier microseconds of ctx.device_barrier(stream): `per_sample` calls per timed sample,
/// either launched one by one or captured once into a graph that each sample replays.
example::Stats host_launched(iris::Context& ctx, bool graph, int per_sample, int samples) {
  cudaStream_t stream;
  IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraphExec_t replay = nullptr;
  if (graph) {
    cudaGraph_t captured;
    IRIS_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < per_sample; ++i) ctx.device_barrier(stream);
    IRIS_CUDA_CHECK(cudaStreamEndCapture(stream, &captured));
    IRIS_CUDA_CHECK(cudaGraphInstantiate(&replay, captured, 0));
    IRIS_CUDA_CHECK(cudaGraphDestroy(captured));
  }
  example::Repeats repeats;
  repeats.samples = samples;
  ctx.barrier();
  std::vector<double> ms = example::time_calls_ms(stream, repeats, [&](long) {
    if (graph) {
      IRIS_CUDA_CHECK(cudaGraphLaunch(replay, stream));
    } else {
      for (int i = 0; i < per_sample; ++i) ctx.device_barrier(stream);
    }
  });
  ctx.barrier();
  if (replay != nullptr) IRIS_CUDA_CHECK(cudaGraphExecDestroy(replay));
  IRIS_CUDA_CHECK(cudaStreamDestroy(stream));
  for (double& sample : ms) sample *= 1e3 / per_sample;  // ms per sample -> us per barrier
  return example::summarize(ms);
}

}  // namespace

int main(int argc, char** argv) {
  if (!example::gpu_visible("barrier_latency")) return 0;
  const int barriers =
      std::max(2 * kBarriersPerBatch,
               static_cast<int>(example::number_arg(argc, argv, "--barriers", 10000)) /
                   kBarriersPerBatch * kBarriersPerBatch);
  const int launches = static_cast<int>(example::number_arg(argc, argv, "--launches", 5));
  const int placements = static_cast<int>(example::number_arg(argc, argv, "--placements", 0));
  try {
    auto ctx = iris::Context::from_env();
    const std::vector<int> devices = iris::bench::device_of_each_rank(ctx.bootstrap());
    const auto ranks_on_my_gpu =
        static_cast<int>(std::count(devices.begin(), devices.end(), devices[ctx.rank()]));
    // A grid barrier needs every block of every rank resident at once: ranks that share a GPU
    // share its SMs, one block per SM at most.
    const int grid_blocks = std::max(1, example::sm_count() / ranks_on_my_gpu);

    // Checks: the in-kernel barriers with the grids timed below, then device_barrier between
    // kernels on one stream. Round numbers keep growing, so no round can pass on old values.
    constexpr int kCheckRounds = 100;
    auto slots = ctx.zeros<std::uint64_t>(ctx.world_size());
    auto stale = ctx.zeros<unsigned>(1);
    const iris::Barriers bars = ctx.make_barriers(1);
    check_in_kernel<<<1, kThreadsPerBlock>>>(ctx.device(), World<iris::block>{}, slots.data(), 1,
                                             kCheckRounds, stale.data());
    check_in_kernel<<<grid_blocks, kThreadsPerBlock>>>(ctx.device(), World<iris::grid>{},
                                                       slots.data(), 1 + kCheckRounds, kCheckRounds,
                                                       stale.data());
    check_in_kernel<<<1, kThreadsPerBlock>>>(ctx.device(), Object<true>{bars.device()},
                                             slots.data(), 1 + 2 * kCheckRounds, kCheckRounds,
                                             stale.data());
    IRIS_CUDA_CHECK(cudaGetLastError());
    for (std::uint64_t round = 1 + 3 * kCheckRounds; round <= 4 * kCheckRounds; ++round) {
      publish<<<1, 1>>>(ctx.device(), slots.data(), round);
      ctx.device_barrier();
      check<<<1, 1>>>(ctx.device(), slots.data(), round, stale.data());
      ctx.device_barrier();
    }
    IRIS_CUDA_CHECK(cudaGetLastError());
    ctx.barrier();
    const double most_stale = iris::bench::slowest_rank(ctx.bootstrap(), stale.to_host()[0]);
    if (most_stale != 0) {
      if (ctx.rank() == 0)
        std::printf(
            "WRONG: a rank read stale values after a barrier (%.0f slots on the worst rank)\n",
            most_stale);
      return 1;
    }

    struct Case {
      std::string barrier;
      example::Stats us;
    };
    // The same order on every rank: each case is collective.
    std::vector<Case> cases = {
        {"barrier(block), 1 block", in_kernel(ctx, World<iris::block>{}, 1, barriers, launches)},
        {"barrier(grid), " + std::to_string(grid_blocks) + " blocks",
         in_kernel(ctx, World<iris::grid>{}, grid_blocks, barriers, launches)},
        {"barrier object: sync, 1 block",
         in_kernel(ctx, Object<false>{bars.device()}, 1, barriers, launches)},
        {"barrier object: arrive + wait, 1 block",
         in_kernel(ctx, Object<true>{bars.device()}, 1, barriers, launches)},
        {"ctx.device_barrier, launches",
         host_launched(ctx, false, kBarriersPerBatch, 2 * launches + 1)},
        {"ctx.device_barrier, CUDA graph",
         host_launched(ctx, true, kBarriersPerBatch, 2 * launches + 1)},
    };
    if (placements > 0) {
      const iris::Barriers spread = ctx.make_barriers(placements);
      for (int c = 0; c < placements; ++c) {
        cases.push_back({"barrier object: sync, channel " + std::to_string(c) + " of " +
                             std::to_string(placements),
                         in_kernel(ctx, Object<false>{spread.device(), c}, 1, barriers, launches)});
      }
    }

    std::vector<iris::bench::Row> rows;
    for (const Case& c : cases) {
      const double median = iris::bench::slowest_rank(ctx.bootstrap(), c.us.median);
      const double fastest = -iris::bench::slowest_rank(ctx.bootstrap(), -c.us.min);
      const double slowest = iris::bench::slowest_rank(ctx.bootstrap(), c.us.max);
      rows.push_back(iris::bench::Row()
                         .text("barrier", c.barrier)
                         .number("ranks", ctx.world_size(), "%.0f")
                         .number("us_median", median, "%.2f")
                         .number("us_min", fastest, "%.2f")
                         .number("us_max", slowest, "%.2f"));
    }
    if (ctx.rank() == 0) {
      const std::string note =
          "us per barrier: slowest rank's median; min/max over all ranks' samples. Checked "
          "first: " +
          std::to_string(4 * kCheckRounds) + " rounds of write-barrier-read, no stale value. " +
          std::to_string(ranks_on_my_gpu) + " rank(s) on rank 0's GPU" +
          (ranks_on_my_gpu > 1 ? " (they share it under MPS; without MPS they time-slice)." : ".");
      iris::bench::report(
          "cross-rank barrier latency, " + std::to_string(ctx.world_size()) + " ranks", rows,
          iris::bench::json_path_from_args(argc, argv), note);
    }
    return 0;
  } catch (const iris::Error& error) {
    std::fprintf(stderr, "barrier_latency: %s\n", error.what());
    return 1;
  }
}
