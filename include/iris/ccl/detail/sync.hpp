// Cross-rank synchronisation inside iris::ccl: data-ready flags with epochs, kept in the
// communicator's workspace. Every flag only grows, lives on the device, and is never reset, so a
// kernel that uses them replays in a CUDA graph any number of times and needs no host step per
// call. Everything ccl synchronises goes through this header (so that it can move onto the
// device API's barrier objects in one place). Not public.
//
// Epochs. A team's collectives are counted by Control::team on every member: each kernel's
// blocks read the count at their start (epoch = count + 1) and the last block to finish stores
// the new count, so the next kernel on the stream sees it (kernel boundaries order it); every
// member runs the same collectives in the same order, so all agree on the epoch without talking.
//
// Exchanges. Block c of every member meets block c of every other member on channel c: thread k
// stores a value on member k's slot sync[c][me] (release, system scope, after the block synced,
// so the whole block's earlier writes come first) and waits (acquire, bounded) until its own
// slot sync[c][k] reaches the value; the block syncs again. Values are
// epoch * kStepsPerEpoch + step, so they grow across calls and across the steps of one call.
#pragma once

#include <cstdint>

#include "iris/ccl/detail/workspace.hpp"
#include "iris/ccl/handle.hpp"
#include "iris/device/detail/barrier_impl.hpp"
#include "iris/device/detail/wait.hpp"
#include "iris/device/signal.hpp"

namespace iris::ccl::detail {

/// Values one epoch spans: steps 0 .. kStepsPerEpoch - 1 of exchanges within one call.
inline constexpr std::uint64_t kStepsPerEpoch = 256;

IRIS_DEVICE_FN IRIS_FORCEINLINE Control* control(const device::Communicator& comm) {
  return reinterpret_cast<Control*>(comm.workspace);
}

/// Every thread of every block: the epoch of the call that this kernel runs.
IRIS_DEVICE_FN IRIS_FORCEINLINE std::uint64_t epoch_begin(const EpochCounter* counter) {
  return iris::device::detail::relaxed_cta::load(&counter->value) + 1;
}

/// Every thread of every block, once, at the end: the last block to get here publishes `epoch`
/// as the count of completed calls and resets the block count for the next kernel.
IRIS_DEVICE_FN inline void epoch_end(EpochCounter* counter, std::uint64_t epoch) {
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
    __threadfence();
    const unsigned blocks = gridDim.x * gridDim.y * gridDim.z;
    if (atomicAdd(&counter->finished, 1u) == blocks - 1) {
      atomicExch(&counter->finished, 0u);
      atomicExch(reinterpret_cast<unsigned long long*>(&counter->value),
                 static_cast<unsigned long long>(epoch));
      __threadfence();
    }
  }
}

IRIS_DEVICE_FN IRIS_FORCEINLINE std::uint64_t exchange_value(std::uint64_t epoch, unsigned step) {
  return epoch * kStepsPerEpoch + step;
}

/// Reports and traps unless `channel` is one the workspace has.
IRIS_DEVICE_FN IRIS_FORCEINLINE void check_channel(const device::Communicator& comm, int channel,
                                                   const char* operation) {
  if (channel < 0 || channel >= kMaxChannels) {
    iris::device::detail::report_and_trap(comm.ctx,
                                          {.kind = iris::device::detail::ErrorKind::kTooManyBlocks,
                                           .operation = operation,
                                           .target_rank = comm.ctx.rank(),
                                           .expected = static_cast<std::uint64_t>(kMaxChannels),
                                           .observed = static_cast<std::uint64_t>(channel)});
  }
}

/// The whole block meets the same channel of every team member at `value` (see the top).
/// Ordering: every write the block made before, to any rank, is visible to every member's block
/// after it.
IRIS_DEVICE_FN inline void team_exchange(const device::Communicator& comm, int channel,
                                         std::uint64_t value, const char* operation) {
  check_channel(comm, channel, operation);
  Control* c = control(comm);
  __syncthreads();
  const int n = comm.team.size;
  for (int k = static_cast<int>(threadIdx.x); k < n; k += static_cast<int>(blockDim.x))
    iris::device::signal_set(comm.ctx, &c->sync[channel][comm.index], value, comm.world_rank(k));
  for (int k = static_cast<int>(threadIdx.x); k < n; k += static_cast<int>(blockDim.x)) {
    iris::device::detail::wait_for<cuda::memory_order_acquire, cuda::thread_scope_system>(
        comm.ctx, operation, &c->sync[channel][k], comm.ctx.rank(), cmp::ge, value,
        {.what = iris::device::detail::Awaited::kRank, .rank = comm.world_rank(k)});
  }
  __syncthreads();
}

/// One thread: announces `value` in `slot` on world rank `to` (release, system scope).
IRIS_DEVICE_FN IRIS_FORCEINLINE void announce(const device::Communicator& comm, std::uint64_t* slot,
                                              std::uint64_t value, int to) {
  iris::device::signal_set(comm.ctx, slot, value, to);
}

/// One thread: waits (bounded, acquire) until this rank's `slot` reaches `value`, which world
/// rank `from` writes.
IRIS_DEVICE_FN IRIS_FORCEINLINE void await(const device::Communicator& comm,
                                           const std::uint64_t* slot, std::uint64_t value, int from,
                                           const char* operation) {
  iris::device::detail::wait_for<cuda::memory_order_acquire, cuda::thread_scope_system>(
      comm.ctx, operation, slot, comm.ctx.rank(), cmp::ge, value,
      {.what = iris::device::detail::Awaited::kRank, .rank = from});
}

}  // namespace iris::ccl::detail
