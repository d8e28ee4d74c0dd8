// Signal round trip: rank 0 raises a flag on rank 1, rank 1 answers on rank 0's flag, many times
// in one kernel launch, with the device API (signal_set / signal_add / put + signal_add, then
// wait_until) and with raw cuda::atomic_ref at system scope on the same memory, in the same two
// processes. The Iris rows are the raw rows plus whatever the API adds (translation, the bounded
// wait's clock checks), and are compared with them.
//
//   iris-run -n 2 ./bench_signal_latency [--rounds 10000] [--launches 5] [--json out.json]
//
// Timing: rank 0 reads the GPU's global timer around each batch of kRoundsPerBatch round trips
// (events around the launch would add the launch and the two ranks' start skew); the first
// batch of every launch is a warm-up. Reported: the median over all batches of all launches.
#include <cuda/atomic>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "iris/iris.hpp"
#include "report.hpp"

namespace {

constexpr int kRoundsPerBatch = 100;
using Flag = std::uint64_t;
using SystemRef = cuda::atomic_ref<Flag, cuda::thread_scope_system>;

// ---- protocols: how one side tells the other "round r is here" and waits for it -------------

/// Raw libcu++: a release store to the peer's flag; acquire loads of our own.
struct AtomicRefStore {
  Flag* flag;
  __device__ void send(const iris::device::Context& ctx, Flag round, int peer) const {
    SystemRef(*ctx.translate(flag, peer)).store(round, cuda::memory_order_release);
  }
  __device__ void wait(const iris::device::Context&, Flag round) const {
    while (SystemRef(*flag).load(cuda::memory_order_acquire) < round) {
    }
  }
};

/// Raw libcu++: a release fetch_add (a RED, its result unused) on the peer's flag.
struct AtomicRefAdd {
  Flag* flag;
  __device__ void send(const iris::device::Context& ctx, Flag, int peer) const {
    SystemRef(*ctx.translate(flag, peer)).fetch_add(1, cuda::memory_order_release);
  }
  __device__ void wait(const iris::device::Context& ctx, Flag round) const {
    AtomicRefStore{flag}.wait(ctx, round);
  }
};

/// What an Iris user writes: signal_set + wait_until (defaults: release / acquire, sys scope).
struct IrisSignalSet {
  Flag* flag;
  __device__ void send(const iris::device::Context& ctx, Flag round, int peer) const {
    iris::device::signal_set(ctx, flag, round, peer);
  }
  __device__ void wait(const iris::device::Context& ctx, Flag round) const {
    iris::device::wait_until(ctx, flag, iris::cmp::ge, round);
  }
};

/// signal_add + wait_until.
struct IrisSignalAdd {
  Flag* flag;
  __device__ void send(const iris::device::Context& ctx, Flag, int peer) const {
    iris::device::signal_add(ctx, flag, Flag{1}, peer);
  }
  __device__ void wait(const iris::device::Context& ctx, Flag round) const {
    IrisSignalSet{flag}.wait(ctx, round);
  }
};

/// A message: 16 bytes of payload and the flag in one put(..., signal_add); the receiver checks
/// that the payload of round r arrived with the flag of round r.
struct IrisPutWithSignal {
  Flag* flag;
  uint4* inbox;     // symmetric: the peer's copy receives
  uint4* outbox;    // local staging for the payload
  unsigned* wrong;  // symmetric counter of payloads that did not match their flag
  __device__ void send(const iris::device::Context& ctx, Flag round, int peer) const {
    const auto r = static_cast<unsigned>(round);
    *outbox = uint4{r, ~r, r + 1, ~(r + 1)};
    iris::device::put(iris::thread{}, ctx, inbox, outbox, 1, peer,
                      iris::device::signal_add(flag, Flag{1}));
  }
  __device__ void wait(const iris::device::Context& ctx, Flag round) const {
    IrisSignalSet{flag}.wait(ctx, round);
    const auto r = static_cast<unsigned>(round);
    const uint4 got = *inbox;
    if (got.x != r || got.y != ~r || got.z != r + 1 || got.w != ~(r + 1)) ++*wrong;
  }
};

/// One thread per rank plays `rounds` round trips: the opener (rank 0) sends round r and waits
/// for the answer; the other side waits for round r and answers. Flag values only grow:
/// round r of a launch is `first_round + r`, on both ranks.
template <class Protocol>
__global__ void ping_pong(const __grid_constant__ iris::device::Context ctx, Protocol protocol,
                          int peer, bool opener, Flag first_round, int rounds,
                          std::uint64_t* batch_ns) {
  std::uint64_t start = 0;
  for (int r = 0; r < rounds; ++r) {
    const Flag round = first_round + r;
    if (r % kRoundsPerBatch == 0) start = iris::bench::device_clock_ns();
    if (opener) {
      protocol.send(ctx, round, peer);
      protocol.wait(ctx, round);
    } else {
      protocol.wait(ctx, round);
      protocol.send(ctx, round, peer);
    }
    if ((r + 1) % kRoundsPerBatch == 0)
      batch_ns[r / kRoundsPerBatch] = iris::bench::device_clock_ns() - start;
  }
}

struct Result {
  std::string name;
  std::size_t baseline;  // the raw row this one is compared with (itself for raw rows)
  bool targeted;         // compared with its raw row in the summary line
  example::Stats us;     // per round trip, over batches
};

/// Runs `launches` + 1 launches of the ping-pong (the first is a warm-up) and returns rank 0's
/// per-round-trip statistics; the other ranks return empty statistics.
template <class Protocol>
example::Stats measure(iris::Context& ctx, const Protocol& protocol, int rounds, int launches) {
  const int batches = rounds / kRoundsPerBatch;
  std::uint64_t* batch_ns = nullptr;
  IRIS_CUDA_CHECK(cudaMalloc(&batch_ns, sizeof(std::uint64_t) * batches));
  const int me = ctx.rank();
  const bool plays = me < 2;  // ranks past 1 only keep the job's barriers
  std::vector<double> us_per_round_trip;
  for (int launch = 0; launch <= launches; ++launch) {
    ctx.barrier();
    if (plays) {
      // Round numbers start at 1 (the flags start at 0) and continue across launches.
      const Flag first_round = Flag{1} + static_cast<Flag>(launch) * rounds;
      ping_pong<<<1, 1>>>(ctx.device(), protocol, 1 - me, me == 0, first_round, rounds, batch_ns);
      IRIS_CUDA_CHECK(cudaGetLastError());
    }
    ctx.barrier();  // both sides done: the flags are at the launch's last round
    if (me != 0 || launch == 0) continue;
    std::vector<std::uint64_t> ns(batches);
    IRIS_CUDA_CHECK(
        cudaMemcpy(ns.data(), batch_ns, sizeof(std::uint64_t) * batches, cudaMemcpyDeviceToHost));
    for (int b = 1; b < batches; ++b)  // batch 0 absorbed the start skew
      us_per_round_trip.push_back(static_cast<double>(ns[b]) / 1e3 / kRoundsPerBatch);
  }
  IRIS_CUDA_CHECK(cudaFree(batch_ns));
  return example::summarize(us_per_round_trip);
}

}  // namespace

int main(int argc, char** argv) {
  if (!example::gpu_visible("signal_latency")) return 0;
  const int rounds = std::max(2 * kRoundsPerBatch,
                              static_cast<int>(example::number_arg(argc, argv, "--rounds", 10000)) /
                                  kRoundsPerBatch * kRoundsPerBatch);
  const int launches = static_cast<int>(example::number_arg(argc, argv, "--launches", 5));
  try {
    auto ctx = iris::Context::from_env();
    if (ctx.world_size() < 2) {
      std::fprintf(stderr, "signal_latency: needs at least 2 ranks (iris-run -n 2 ...)\n");
      return 1;
    }
    // Each protocol gets fresh flags (zeros), so every one starts from round 1.
    auto flags = ctx.zeros<Flag>(5);
    auto inbox = ctx.zeros<std::uint32_t>(4);
    auto outbox = ctx.zeros<std::uint32_t>(4);
    auto wrong = ctx.zeros<std::uint32_t>(1);
    Flag* f = flags.data();
    const IrisPutWithSignal message{f + 4, reinterpret_cast<uint4*>(inbox.data()),
                                    reinterpret_cast<uint4*>(outbox.data()), wrong.data()};

    // Each baseline first, then the API forms of the same operation (a set against a store; an
    // add, and a message, against a fetch_add). Braced lists run in order: the same on all ranks.
    const std::vector<Result> results = {
        {"atomic_ref store / load (raw)", 0, false,
         measure(ctx, AtomicRefStore{f + 0}, rounds, launches)},
        {"signal_set / wait_until", 0, true, measure(ctx, IrisSignalSet{f + 1}, rounds, launches)},
        {"atomic_ref fetch_add / load (raw)", 2, false,
         measure(ctx, AtomicRefAdd{f + 2}, rounds, launches)},
        {"signal_add / wait_until", 2, true, measure(ctx, IrisSignalAdd{f + 3}, rounds, launches)},
        {"put 16 B + signal_add / wait_until", 2, false, measure(ctx, message, rounds, launches)},
    };
    const std::uint32_t mismatched = wrong.to_host()[0];
    const std::vector<int> devices = iris::bench::device_of_each_rank(ctx.bootstrap());
    if (ctx.rank() != 0) return mismatched == 0 ? 0 : 1;

    std::vector<iris::bench::Row> rows;
    double highest_ratio = 0;  // of the signal rows that have a raw counterpart
    for (const Result& result : results) {
      const double ratio = result.us.median / results[result.baseline].us.median;
      if (result.targeted) highest_ratio = std::max(highest_ratio, ratio);
      rows.push_back(iris::bench::Row()
                         .text("round trip", result.name)
                         .number("us_median", result.us.median)
                         .number("us_min", result.us.min)
                         .number("us_max", result.us.max)
                         .number("vs_raw", ratio, "%.2f"));
    }
    const bool shared_gpu = devices[0] >= 0 && devices[0] == devices[1];
    std::string note =
        std::to_string(rounds) + " round trips per launch, " + std::to_string(launches) +
        " launches; statistics over batches of " + std::to_string(kRoundsPerBatch) +
        " round trips, per round trip. " +
        (shared_gpu ? "Ranks 0 and 1 share one GPU (needs MPS, else they time-slice)."
                    : "Ranks 0 and 1 are on different GPUs.");
    iris::bench::report("signal round trip, rank 0 <-> rank 1", rows,
                        iris::bench::json_path_from_args(argc, argv), note);
    std::printf("highest ratio of signal_set/signal_add to the raw atomic_ref round trip: %.2f\n",
                highest_ratio);
    if (results[0].us.median > 50)
      std::printf(
          "note: %.0f us per round trip means the ranks' kernels do not run at the same "
          "time: start the MPS daemon when ranks share a GPU\n",
          results[0].us.median);
    if (mismatched != 0) {
      std::printf("WRONG: %u messages arrived without their payload\n", mismatched);
      return 1;
    }
    return 0;
  } catch (const iris::Error& error) {
    std::fprintf(stderr, "signal_latency: %s\n", error.what());
    return 1;
  }
}
