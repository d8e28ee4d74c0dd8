// 06_atomic_add — count across ranks, and hand out tickets from one shared counter.
//
// Teaches: iris::device::atomic_add(ctx, ptr, value, to) adds to rank `to`'s copy and returns the
// value before the add; order and scope come last as tags, and the defaults (iris::acq_rel,
// iris::sys) are right for anything other ranks touch. When nothing is read back, the `_nofetch`
// form is a fire-and-forget reduction, and iris::relaxed says that only the sum matters: the
// barrier that follows publishes it.
//
// Part 1: every thread of every rank adds 1 to a counter on every rank; after ctx.barrier() each
// counter must equal world size x threads per rank. Timed: adds per second.
// Part 2: one thread per rank takes tickets from rank 0's counter; the old value is the ticket,
// so every ticket in the job is different. Checked across ranks; timed: microseconds per ticket
// (each is a round trip to rank 0).
//
//   iris-run -n 4 ./example_06_atomic_add
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "common/example.hpp"
#include "iris/iris.hpp"

namespace {

using Count = std::uint64_t;

__global__ void count_everywhere(const __grid_constant__ iris::device::Context ctx,
                                 Count* counter) {
  for (int k = 0; k < ctx.world_size(); ++k) {
    const int to = (ctx.rank() + k) % ctx.world_size();  // spread the ranks over the counters
    iris::device::atomic_add_nofetch(ctx, counter, Count{1}, to, iris::relaxed);
  }
}

__global__ void take_tickets(const __grid_constant__ iris::device::Context ctx, Count* next_ticket,
                             Count* tickets, int count) {
  for (int i = 0; i < count; ++i)
    tickets[i] = iris::device::atomic_add(ctx, next_ticket, Count{1}, 0);
}

}  // namespace

int main() {
  if (!example::gpu_visible("06_atomic_add")) return iris::examples::kNoDeviceExitCode;
  try {
    auto ctx = iris::Context::from_env();
    const int world = ctx.world_size();

    // Part 1: counting.
    const int blocks = 2 * example::sm_count();
    constexpr int kThreads = 256;
    auto counter = ctx.zeros<Count>(1);
    auto count = [&] { count_everywhere<<<blocks, kThreads>>>(ctx.device(), counter.data()); };
    count();
    IRIS_CUDA_CHECK(cudaGetLastError());
    ctx.barrier();  // every rank's adds are done and visible
    const Count expected = Count(world) * blocks * kThreads;
    if (const Count total = counter.to_host()[0]; total != expected) {
      std::printf("rank %d: counter holds %llu, expected %llu: WRONG\n", ctx.rank(),
                  static_cast<unsigned long long>(total),
                  static_cast<unsigned long long>(expected));
      return 1;
    }
    ctx.barrier();
    const double count_ms = example::median_ms(nullptr, {}, [&](long) { count(); });

    // Part 2: tickets.
    constexpr int kTickets = 10000;
    auto next_ticket = ctx.zeros<Count>(1);  // only rank 0's copy is used
    auto tickets = ctx.zeros<Count>(kTickets);
    auto take = [&] {
      take_tickets<<<1, 1>>>(ctx.device(), next_ticket.data(), tickets.data(), kTickets);
    };
    take();
    IRIS_CUDA_CHECK(cudaGetLastError());
    const std::vector<Count> mine = tickets.to_host();
    std::vector<Count> all(std::size_t{kTickets} * world);
    ctx.bootstrap().allgather(mine.data(), all.data(), sizeof(Count) * kTickets);
    std::sort(all.begin(), all.end());
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (all[i] != i) {  // the tickets must be exactly 0, 1, ..., world * kTickets - 1
        std::printf("rank %d: ticket %llu was handed out twice or never: WRONG\n", ctx.rank(),
                    static_cast<unsigned long long>(i));
        return 1;
      }
    }
    ctx.barrier();
    example::Repeats few;  // each call is already 10000 round trips
    few.warmup = 1;
    few.samples = 5;
    const double ticket_ms = example::median_ms(nullptr, few, [&](long) { take(); });

    std::printf(
        "rank %d: counts and %d tickets correct; %.2f G adds/s from this rank, "
        "%.2f us per ticket (%d ranks contending)\n",
        ctx.rank(), kTickets, Count(world) * blocks * kThreads / (count_ms * 1e-3) / 1e9,
        ticket_ms * 1e3 / kTickets, world);
    return 0;
  } catch (const iris::Error& error) {
    std::fprintf(stderr, "06_atomic_add: %s\n", error.what());
    return iris::examples::exit_code(error);
  }
}
