// 08_message_passing — a producer streams messages to a consumer through a small ring of slots,
// with flags both ways and no host in the loop.
//
// Teaches:
//   - put(..., iris::device::signal_add(flag, 1)): data and "it is there" in one call. The
//     block syncs, then its leader raises the flag on the destination with release at system scope, so a
//     consumer that sees the flag (wait_until, acquire) sees the data.
//   - wait_until(iris::block{}, ctx, flag, iris::cmp::ge, n): the block waits for the n-th
//     signal. Flags only count up, so nothing is ever reset: a run that follows another goes on
//     counting (here `first_use`), and so does a CUDA-graph replay.
//   - flow control: the consumer hands each slot back with signal_add on the producer's `freed`
//     flag, after the whole block has finished reading it; the producer waits for that before it
//     reuses the slot.
//   - ctx.device_barrier(stream): the ranks line up on the GPU, stream-ordered, without the host
//     waiting; each timed run starts with one so that both sides start together.
//
// Ranks pair up: even rank p produces, rank p + 1 consumes (an odd last rank sits out). Each of
// kChannels block pairs moves kMessages messages of kTile ints through kSlots slots of the
// consumer's inbox; the consumer copies each message out to `received`, which must end up equal
// to the producer's `source`. Timed: the whole stream, on the consumer.
//
//   iris-run -n 2 ./example_08_message_passing
#include <cstdint>
#include <cstdio>
#include <vector>

#include "common/example.hpp"
#include "iris/iris.hpp"

namespace {

using Flag = std::uint64_t;
constexpr int kChannels = 32;         // block pairs, each with its own ring of slots
constexpr int kSlots = 4;             // messages in flight per channel
constexpr int kMessages = 128;        // per channel and run
constexpr std::size_t kTile = 16384;  // ints per message: 64 KiB
constexpr int kThreads = 256;
constexpr std::size_t kStream = std::size_t{kChannels} * kMessages * kTile;  // ints per run

/// Symmetric state of all channels: slot (c, s) is index c * kSlots + s.
struct Channels {
  int* inbox;   // kChannels * kSlots * kTile ints; the consumer's copy receives
  Flag* ready;  // the consumer's copy: messages delivered into each slot
  Flag* freed;  // the producer's copy: messages the consumer has finished with, per slot
};

/// Message m of a run is the slot's (first_use + m / kSlots)-th use since the program started.
__device__ Flag use_of(Flag first_use, int m) {
  return first_use + m / kSlots;
}

__global__ void __launch_bounds__(kThreads)
    produce(const __grid_constant__ iris::device::Context ctx, Channels channels, const int* source,
            int consumer, Flag first_use) {
  const std::size_t c = blockIdx.x;
  for (int m = 0; m < kMessages; ++m) {
    const std::size_t slot = c * kSlots + m % kSlots;
    // The consumer has emptied this slot as often as it was filled before: it is free.
    iris::device::wait_until(iris::block{}, ctx, channels.freed + slot, iris::cmp::ge,
                             use_of(first_use, m));
    iris::device::put(iris::block{}, ctx, channels.inbox + slot * kTile,
                      source + (c * kMessages + m) * kTile, kTile, consumer,
                      iris::device::signal_add(channels.ready + slot, Flag{1}));
  }
}

__global__ void __launch_bounds__(kThreads)
    consume(const __grid_constant__ iris::device::Context ctx, Channels channels, int* received,
            int producer, Flag first_use) {
  const std::size_t c = blockIdx.x;
  for (int m = 0; m < kMessages; ++m) {
    const std::size_t slot = c * kSlots + m % kSlots;
    iris::device::wait_until(iris::block{}, ctx, channels.ready + slot, iris::cmp::ge,
                             use_of(first_use, m) + 1);
    // Use the message: here, copy it out (16-byte vectors; a real consumer would compute on it).
    const auto* message = reinterpret_cast<const int4*>(channels.inbox + slot * kTile);
    auto* out = reinterpret_cast<int4*>(received + (c * kMessages + m) * kTile);
    for (std::size_t i = threadIdx.x; i < kTile / 4; i += blockDim.x) out[i] = message[i];
    __syncthreads();  // the whole block is done with the slot...
    if (threadIdx.x == 0) iris::device::signal_add(ctx, channels.freed + slot, Flag{1}, producer);
  }
}

}  // namespace

int main() {
  if (!example::gpu_visible("08_message_passing")) return iris::examples::kNoDeviceExitCode;
  try {
    auto ctx = iris::Context::from_env();
    const bool producer = ctx.rank() % 2 == 0;
    const int partner = producer ? ctx.rank() + 1 : ctx.rank() - 1;
    const bool paired = partner < ctx.world_size();
    // Collective allocations: every rank makes them, paired or not.
    auto source = ctx.arange<int>(kStream);
    auto received = ctx.zeros<int>(kStream);
    auto inbox = ctx.empty<int>(std::size_t{kChannels} * kSlots * kTile);
    auto ready = ctx.zeros<Flag>(kChannels * kSlots);
    auto freed = ctx.zeros<Flag>(kChannels * kSlots);
    const Channels channels{inbox.data(), ready.data(), freed.data()};

    cudaStream_t stream;
    IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    auto run = [&](long run_index) {
      ctx.device_barrier(stream);  // both sides start together
      if (!paired) return;
      const Flag first_use = static_cast<Flag>(run_index) * (kMessages / kSlots);
      if (producer) {
        produce<<<kChannels, kThreads, 0, stream>>>(ctx.device(), channels, source.data(), partner,
                                                    first_use);
      } else {
        consume<<<kChannels, kThreads, 0, stream>>>(ctx.device(), channels, received.data(),
                                                    partner, first_use);
      }
    };

    run(0);
    IRIS_CUDA_CHECK(cudaGetLastError());
    IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (paired && !producer) {
      const std::vector<int> got = received.to_host();
      if (!example::check(ctx.rank(), "received values", got,
                          [](std::size_t i) { return static_cast<int>(i); }))
        return 1;
    }

    // Runs 1, 2, ... continue the flags' counts where run 0 left them.
    const double ms = example::median_ms(stream, {}, [&](long call) { run(1 + call); });
    IRIS_CUDA_CHECK(cudaStreamDestroy(stream));
    if (!paired) {
      std::printf("rank %d: no partner (odd number of ranks), sat out\n", ctx.rank());
    } else if (!producer) {
      std::printf(
          "rank %d: received %zu MiB from rank %d as %d messages of %zu KiB (%d slots x %d "
          "channels), all correct: %.0f GB/s\n",
          ctx.rank(), kStream * sizeof(int) >> 20, partner, kChannels * kMessages,
          kTile * sizeof(int) >> 10, kSlots, kChannels,
          example::gb_per_s(kStream * sizeof(int), ms));
    }
    return 0;
  } catch (const iris::Error& error) {
    std::fprintf(stderr, "08_message_passing: %s\n", error.what());
    return iris::examples::exit_code(error);
  }
}
