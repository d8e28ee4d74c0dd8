// Cross-rank synchronisation inside iris::ccl, in one place. Two mechanisms of the device API,
// each for its own concept, and one local count. Not public.
//
// Barriers: block c of every team member meets block c of every other member (team_exchange).
// They run on the communicator's barrier object (iris/device/barrier.hpp), made once when the
// communicator is made: one channel per block of the largest grid ccl launches (kMaxChannels),
// block c on channel c. The arrival epoch is not the channel's next one but a number the call
// derives from the team's epoch (below): exchange_value(epoch, step) = epoch * kStepsPerEpoch +
// step (detail::arrive_at), so every member agrees on it without talking, whatever grids the
// calls before had, and a timeout report names the collective and step (the operation), the
// channel, the missing rank and the values.
//
// Signals: data-ready flags that carry a value (the send/recv handshake's ready and done, the
// one-shot all_reduce's packets, the argument check's packets) are signals of
// iris/device/signal.hpp and iris/device/packet.hpp, one writer and one reader each, in the
// communicator's workspace (workspace.hpp); announce/await below name them. They are not
// barriers: nobody waits for the whole team.
//
// Epochs. A team's collectives are counted by Control::team on every member: each kernel's
// blocks read the count at their start (epoch = count + 1) and the last block to finish stores
// the new count, so the next kernel on the stream sees it (kernel boundaries order it); every
// member runs the same collectives in the same order, so all agree on the epoch without talking.
// The count is this rank's own (no other rank reads it); a send/recv pair counts its calls the
// same way (Control::send/recv).
//
// No reset: barrier epochs, signals and counts only grow and live on the device, so a kernel
// that uses them replays in a CUDA graph any number of times and needs no host step per call.
#pragma once

#include <cstdint>

#include "iris/ccl/detail/workspace.hpp"
#include "iris/ccl/handle.hpp"
#include "iris/device/barrier.hpp"
#include "iris/device/coop.hpp"
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
/// Only the next kernel on the stream (or after it in a graph) reads the count, and a kernel
/// boundary makes every write of the kernel before visible to it: so no fence is needed, and a
/// one-block grid, whose block is the last by definition, stores the count without an atomic.
/// (This tail sits on the critical path of every small collective: thread 0 has just stored its
/// packets to every member, and a fence would wait for all of them to land.)
IRIS_DEVICE_FN inline void epoch_end(EpochCounter* counter, std::uint64_t epoch) {
  __syncthreads();
  if (threadIdx.x != 0 || threadIdx.y != 0 || threadIdx.z != 0) return;
  const unsigned blocks = gridDim.x * gridDim.y * gridDim.z;
  if (blocks == 1 || atomicAdd(&counter->finished, 1u) == blocks - 1) {
    if (blocks != 1) counter->finished = 0;
    counter->value = epoch;
  }
}

IRIS_DEVICE_FN IRIS_FORCEINLINE std::uint64_t exchange_value(std::uint64_t epoch, unsigned step) {
  return epoch * kStepsPerEpoch + step;
}

/// The whole block meets block `channel` of every team member at `value` (exchange_value of the
/// call's epoch and a step above the block's earlier steps in the call), on the communicator's
/// barrier object. Ordering: every write the block made before, to any rank, is visible to every
/// member's block after it (the barrier's guarantee).
IRIS_DEVICE_FN inline void team_exchange(const device::Communicator& comm, int channel,
                                         std::uint64_t value, const char* operation) {
  namespace dd = iris::device::detail;
  const iris::block block;
  dd::wait_on(block, comm.ctx, comm.barriers,
              dd::arrive_at(block, comm.ctx, comm.barriers, channel, value, operation), operation,
              dd::Awaited::kChannelRank);
}

/// The rooted pushes (gather, reduce), where the members write into the root's dst, which only
/// the root names: thread 0 of every block of the root stores dst's heap offset in each other
/// member's Control::root_dst before the block's entry exchange, which orders the stores before
/// the members' reads after theirs (every block stores the same offset). Call it on every rank;
/// it does nothing on the others.
IRIS_DEVICE_FN inline void publish_root_dst(const device::Communicator& comm, int root,
                                            const void* dst) {
  if (comm.index != root || threadIdx.x != 0) return;
  Control* c = control(comm);
  const std::uint64_t at = comm.ctx.offset_of(dst);
  for (int k = 0; k < comm.team.size; ++k)
    if (k != root) *comm.ctx.translate(&c->root_dst, comm.world_rank(k)) = at;
}

/// After the entry exchange: the root's dst as an address of this rank's heap (the same offset;
/// translate it to the root, or let put() do so) — `dst` itself on the root.
template <class T>
IRIS_DEVICE_FN IRIS_FORCEINLINE T* root_dst(const device::Communicator& comm, int root, T* dst) {
  return comm.index == root ? dst : comm.ctx.at<T>(control(comm)->root_dst, comm.ctx.rank());
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
