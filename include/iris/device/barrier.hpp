// Barriers across ranks: barrier objects the host hands out, and world barriers.
//
//   // host, collective: 4 independent channels for the ranks of a tensor-parallel group
//   iris::Barriers bars = ctx.make_barriers(tp, 4);
//   kernel<<<grid, block, 0, stream>>>(ctx.device(), bars.device(), ...);
//
//   // device: the block (or any group) names the channel it uses
//   iris::device::sync(iris::block{}, ctx, bars, blockIdx.x);            // a whole barrier
//   auto token = iris::device::arrive(iris::block{}, ctx, bars, 1);       // split: arrive,
//   compute_something_else();                                             // overlap,
//   iris::device::wait(iris::block{}, ctx, bars, token);                  // then wait
//
//   iris::device::barrier(iris::block{}, ctx);   // world: block b meets block b of every rank
//   iris::device::barrier(iris::grid{}, ctx);    // world: the whole grid meets every rank's grid
//
// Barrier objects. ctx.make_barriers(team, count) (collective over the world, like every
// allocation) gives `count` independent channels for the ranks of `team`, zeroed; the device
// handle, bars.device(), is trivially copyable and goes to kernels by value. On each rank, one
// group at a time uses a channel; different channels are independent, so two kernels on two
// streams, or two groups of one kernel, may run barriers at once on channels of their own.
// Every member rank of the team runs the same sequence of barriers on a channel; ranks outside
// the team must not use it (it reports and traps). Ranks may pass different teams of one size,
// each its own group's (the tensor-parallel groups of iris/device/team.hpp): the object then
// serves every group at once, each rank using its own group's channels.
//
// Ordering guarantee (barrier objects and world barriers alike): everything any member of the
// group wrote before arrive() (or sync()/barrier()), to any rank's memory, plain stores
// included, is visible to every member of the group of every team rank after that rank's wait()
// for the same token returns. This follows the publishing rule of iris/device/signal.hpp: the
// group syncs, then its members release their arrival at system scope; the waiters acquire
// the arrivals at system scope, then their group syncs.
//
// Split phases: arrive() announces this rank's arrival and returns at once with a token, the
// epoch it arrived at; wait(token) returns once every team member has arrived at that epoch.
// Between them the group may do anything (compute, other channels). On one channel a group
// alternates: arrive, wait, arrive, wait, each wait with the token of the arrive before it; a
// second arrive before the wait, or a wait with an older token, is a misuse, which debug checks
// (IRIS_DEBUG_CHECKS=1) report and trap on, naming the channel and the epochs ("rank 0: barrier
// arrive: a second arrive on channel 1 before the wait for its arrival at epoch 3 ...").
//
// No reset: epochs live in the channels and only grow, so barriers run any number of times,
// across kernel launches and CUDA-graph replays. Each wait is bounded by ctx.wait_timeout_ns();
// when it runs out, the report names the channel, the rank that did not come, and the epochs
// ("rank 0: barrier wait timed out after 30.0 s on channel 2 waiting for rank 3 to arrive at
// epoch 7 (it has reached epoch 6; ...)").
#pragma once

#include <cstddef>
#include <cstdint>

#include "iris/device/context.hpp"
#include "iris/device/detail/config.hpp"
#include "iris/device/team.hpp"
#if defined(__CUDACC__)
#include "iris/device/coop.hpp"
#endif

namespace iris::device {

/// The device handle of a barrier object (iris::Barriers::device()): `channels()` independent
/// barrier channels for the ranks of `team()`. Trivially copyable; pass it by value.
class Barriers {
 public:
  Barriers() = default;

  /// Made by iris::Barriers (the host object) and by the world barriers; applications do not
  /// call this. `slots` is this rank's copy of the channels' state (heap memory, the same offset
  /// on every rank), `slots_per_channel` 64-bit words per channel: a 128-byte line for the local
  /// epoch, then team.size arrival slots.
  IRIS_HOST_DEVICE Barriers(std::uint64_t* slots, iris::team team, int channels,
                            int slots_per_channel, int rank)
      : slots_(slots),
        team_(team),
        channels_(channels),
        slots_per_channel_(slots_per_channel),
        member_(team.index_of(rank)) {}

  IRIS_HOST_DEVICE const iris::team& team() const { return team_; }
  IRIS_HOST_DEVICE int channels() const { return channels_; }
  /// This rank's index in the team, -1 when it is not a member.
  IRIS_HOST_DEVICE int member() const { return member_; }
  /// This rank's state of `channel`: the line of its local epoch, then team().size arrival
  /// slots (at slots(channel) + 16).
  IRIS_HOST_DEVICE std::uint64_t* slots(int channel) const {
    return slots_ + static_cast<std::ptrdiff_t>(channel) * slots_per_channel_;
  }

 private:
  std::uint64_t* slots_ = nullptr;
  iris::team team_{};
  int channels_ = 0;
  int slots_per_channel_ = 0;
  int member_ = -1;
};

/// What arrive() returns and wait() waits for: the channel and the epoch this rank arrived at.
struct barrier_token {
  int channel;
  std::uint64_t epoch;
};

// The device functions; host-only translation units (iris/host/context.hpp) see the handle only.
#if defined(__CUDACC__)

/// The group announces this rank's arrival on `channel` to every member of the team and returns
/// at once. The group syncs first, so everything its members wrote before is published with
/// the arrival. Every member of the group calls it.
///   auto token = iris::device::arrive(iris::warps<4>{}, ctx, bars, channel);
template <synchronizable_group G>
IRIS_DEVICE_FN barrier_token arrive(G group, const Context& ctx, const Barriers& bars, int channel);

/// The group waits until every member of the team has arrived at `token`'s epoch on its
/// channel, then syncs: afterwards every member of the group sees what every team member's
/// group wrote before its arrive. Bounded; the report names the channel and the missing rank.
///   iris::device::wait(iris::warps<4>{}, ctx, bars, token);
template <synchronizable_group G>
IRIS_DEVICE_FN void wait(G group, const Context& ctx, const Barriers& bars, barrier_token token);

/// arrive, then wait: a whole barrier on `channel`.
///   iris::device::sync(iris::block{}, ctx, bars, blockIdx.x % bars.channels());
template <synchronizable_group G>
IRIS_DEVICE_FN void sync(G group, const Context& ctx, const Barriers& bars, int channel);

/// World convenience: block b (linear block index, below 512) of this rank meets block b of
/// every rank, any number of ranks. Every thread of the block calls it; every rank runs it the
/// same number of times. It is sync() on channel b of a world barrier object that the host
/// Context makes when it starts, so a block must not be in two world block barriers at once (two
/// kernels on different streams that both use block b); barrier objects of your own have no
/// such rule.
///   iris::device::barrier(iris::block{}, ctx);
IRIS_DEVICE_FN void barrier(block, const Context& ctx);

/// World convenience: every thread of every block of this grid waits until all threads of the
/// calling grid of every rank have arrived. All blocks of the grid must be resident at once (size
/// the grid with cudaOccupancyMaxActiveBlocksPerMultiprocessor, leaving room for other ranks'
/// kernels when ranks share a GPU), or the blocks that are not resident are waited for until
/// the timeout. One grid-wide barrier at a time per rank. Grids may differ in shape between
/// ranks. Up to 128 ranks.
///   iris::device::barrier(iris::grid{}, ctx);
IRIS_DEVICE_FN void barrier(grid, const Context& ctx);

#endif  // __CUDACC__

}  // namespace iris::device

#if defined(__CUDACC__)
#include "iris/device/detail/barrier_impl.hpp"
#endif
