// 07_atomic_xchg — a lock that kernels on every rank can take.
//
// Teaches: iris::device::atomic_exchange(ctx, ptr, value, to, order) swaps `value` into rank
// `to`'s copy and returns what was there. A lock is its classic use: swap in 1 until the old
// value was 0, with iris::acquire so that the critical section sees what the previous holder
// wrote; swap 0 back with iris::release so that the section's writes are out before the lock
// looks free. The scope stays iris::sys (the default): the other holders are other processes,
// perhaps on other GPUs, and a gpu-scope lock between ranks is the classic hang or garbage.
// Inside the section, plain iris::device::load and store are enough: the lock orders them.
//
// Thread 0 of every rank takes the lock on rank 0 kRounds times and, holding it, increments a
// plain (non-atomic) counter in rank 0's memory. Without the lock increments would be lost;
// with it rank 0's counter ends at world size x kRounds. Timed: microseconds per
// lock-increment-unlock, all ranks contending.
//
//   iris-run -n 4 ./example_07_atomic_xchg
#include <cstdio>

#include "common/example.hpp"
#include "iris/iris.hpp"

namespace {

constexpr int kHome = 0;  // the rank whose memory holds the lock and the counter

__global__ void increment_under_lock(const __grid_constant__ iris::device::Context ctx,
                                     unsigned* lock, unsigned* counter, int rounds) {
  for (int i = 0; i < rounds; ++i) {
    while (iris::device::atomic_exchange(ctx, lock, 1u, kHome, iris::acquire) != 0) {
    }
    const unsigned value = iris::device::load(ctx, counter, kHome);
    iris::device::store(ctx, counter, value + 1, kHome);
    iris::device::atomic_exchange(ctx, lock, 0u, kHome, iris::release);
  }
}

}  // namespace

int main() {
  if (!example::gpu_visible("07_atomic_xchg")) return iris::examples::kNoDeviceExitCode;
  try {
    auto ctx = iris::Context::from_env();
    constexpr int kRounds = 2000;
    auto lock = ctx.zeros<unsigned>(1);
    auto counter = ctx.zeros<unsigned>(1);
    auto run = [&] {
      increment_under_lock<<<1, 1>>>(ctx.device(), lock.data(), counter.data(), kRounds);
    };

    run();
    IRIS_CUDA_CHECK(cudaGetLastError());
    ctx.barrier();  // every rank's increments are done and visible
    const unsigned expected = static_cast<unsigned>(ctx.world_size()) * kRounds;
    if (ctx.rank() == kHome) {
      if (const unsigned total = counter.to_host()[0]; total != expected) {
        std::printf("rank %d: counter holds %u, expected %u: increments were lost, WRONG\n",
                    ctx.rank(), total, expected);
        return 1;
      }
      std::printf("rank %d: counter holds %u = %d ranks x %d rounds: correct\n", ctx.rank(),
                  expected, ctx.world_size(), kRounds);
    }

    ctx.barrier();
    example::Repeats few;  // each call is already kRounds lock round trips
    few.warmup = 1;
    few.samples = 5;
    const double ms = example::median_ms(nullptr, few, [&](long) { run(); });
    std::printf("rank %d: %.2f us per lock, increment, unlock (%d ranks contending)\n", ctx.rank(),
                ms * 1e3 / kRounds, ctx.world_size());
    return 0;
  } catch (const iris::Error& error) {
    std::fprintf(stderr, "07_atomic_xchg: %s\n", error.what());
    return iris::examples::exit_code(error);
  }
}
