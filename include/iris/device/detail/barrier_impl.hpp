// Bodies behind iris/device/barrier.hpp. Not public.
#pragma once

#include "iris/device/barrier.hpp"
#include "iris/device/detail/barrier_state.hpp"
#include "iris/device/detail/group_sync.hpp"
#include "iris/device/detail/ptx.hpp"
#include "iris/device/detail/report.hpp"
#include "iris/device/detail/wait.hpp"

namespace iris::device::detail {

using release_sys = ptx<cuda::memory_order_release, cuda::thread_scope_system>;
using relaxed_sys = ptx<cuda::memory_order_relaxed, cuda::thread_scope_system>;
// A channel's local epoch is read and written by the one group of this rank that uses the
// channel (kernel boundaries, or whatever synchronization hands the channel on, order the rest).
using relaxed_cta = ptx<cuda::memory_order_relaxed, cuda::thread_scope_block>;

/// World channel `index` (kGridChannel, kDeviceBarrierChannel) of this rank's heap.
IRIS_DEVICE_FN IRIS_FORCEINLINE BarrierChannel* world_channel(const Context& ctx, int index) {
  return reinterpret_cast<BarrierChannel*>(
      reinterpret_cast<std::uint64_t*>(ctx.heap_base() + kWorldChannelsOffset) +
      static_cast<std::ptrdiff_t>(index) * world_channel_slots(ctx.world_size()));
}

/// The grid barrier's local counters on this rank's heap.
IRIS_DEVICE_FN IRIS_FORCEINLINE GridBarrierCounters* grid_barrier_counters(const Context& ctx) {
  return reinterpret_cast<GridBarrierCounters*>(ctx.heap_base() + kBarrierStateOffset);
}

/// The world's reserved channels starting at `channel` (world_channel_slots words each).
IRIS_DEVICE_FN IRIS_FORCEINLINE Barriers world_barriers(const Context& ctx, BarrierChannel* first,
                                                        int channels, const char* operation) {
  if (ctx.world_size() > kBarrierMaxRanks) {
    report_and_trap(ctx, {.kind = ErrorKind::kTooManyRanks,
                          .operation = operation,
                          .target_rank = ctx.rank(),
                          .expected = kBarrierMaxRanks,
                          .observed = static_cast<std::uint64_t>(ctx.world_size())});
  }
  return Barriers(&first->epoch, iris::team::world(ctx.world_size()), channels,
                  world_channel_slots(ctx.world_size()), ctx.rank());
}

/// Misuse of a barrier object: a rank outside the team, or a channel it does not have.
IRIS_DEVICE_FN IRIS_FORCEINLINE void check_channel(const Context& ctx, const Barriers& bars,
                                                   int channel, const char* operation) {
  if (bars.member() < 0) {
    const iris::team& t = bars.team();
    report_and_trap(ctx, {.kind = ErrorKind::kNotInTeam,
                          .operation = operation,
                          .target_rank = ctx.rank(),
                          .expected = static_cast<std::uint64_t>(t.size),
                          .observed = static_cast<std::uint64_t>(t.start) << 32 |
                                      static_cast<std::uint32_t>(t.stride)});
  }
  if (channel < 0 || channel >= bars.channels()) {
    report_and_trap(ctx, {.kind = ErrorKind::kBadChannel,
                          .operation = operation,
                          .target_rank = ctx.rank(),
                          .expected = static_cast<std::uint64_t>(bars.channels()),
                          .observed = static_cast<std::uint64_t>(channel)});
  }
}

/// Debug check of arrive (the group's leader, after the group synced): the channel has no arrival
/// still waiting for its wait(). `state` is the channel's epoch line: word 0 the epoch completed,
/// word 1 the epoch of the last arrive; the leader alone reads and writes word 1.
__noinline__ IRIS_DEVICE_FN inline void check_arrive(const Context& ctx, std::uint64_t* state,
                                                     int channel, std::uint64_t epoch,
                                                     const char* operation) {
  const std::uint64_t pending = relaxed_cta::load(state + 1);
  if (pending >= epoch) {
    report_and_trap(ctx, {.kind = ErrorKind::kArriveTwice,
                          .operation = operation,
                          .target_rank = ctx.rank(),
                          .expected = epoch - 1,
                          .observed = pending,
                          .channel = channel});
  }
  relaxed_cta::store(state + 1, epoch);
}

/// Debug check of wait (the group's leader, before it waits): `token` is the channel's latest
/// arrival, or at least not one the channel completed before.
__noinline__ IRIS_DEVICE_FN inline void check_wait(const Context& ctx, const std::uint64_t* state,
                                                   barrier_token token, const char* operation) {
  const std::uint64_t completed = relaxed_cta::load(state);
  const std::uint64_t pending = relaxed_cta::load(state + 1);
  const bool stale = pending > completed ? token.epoch != pending : token.epoch < completed;
  if (stale) {
    report_and_trap(ctx, {.kind = ErrorKind::kStaleToken,
                          .operation = operation,
                          .target_rank = ctx.rank(),
                          .expected = pending > completed ? pending : completed,
                          .observed = token.epoch,
                          .channel = token.channel});
  }
}

/// arrive() under the caller's name. The group syncs, then every member reads the epoch the
/// channel last completed (the leader stored it after the previous wait's final sync, which this
/// sync orders before the reads) and announces the next one.
template <class G>
IRIS_DEVICE_FN IRIS_FORCEINLINE barrier_token arrive_on(G group, const Context& ctx,
                                                        const Barriers& bars, int channel,
                                                        const char* operation) {
  check_channel(ctx, bars, channel, operation);
  std::uint64_t* state = bars.slots(channel);
  std::uint64_t* slots = state + kEpochSlots;
  const int me = bars.member();
  // Publishes every member's earlier writes with the releases below (signal.hpp, rule (b)).
  group_sync(group, ctx, operation);
  const std::uint64_t epoch = relaxed_cta::load(state) + 1;
  const iris::team& t = bars.team();
  const int n = static_cast<int>(group.num_threads());
  const int first = static_cast<int>(group.thread_rank());
  if (ctx.debug_checks() && first == 0) check_arrive(ctx, state, channel, epoch, operation);
  for (int i = first; i < t.size; i += n)
    release_sys::store(ctx.translate_unchecked(slots + me, t.world_rank(i)), epoch);
  return {channel, epoch};
}

/// wait() under the caller's name: member k of the group waits for team members k, k + n, ...;
/// the final sync hands what they acquired to the whole group, and then the leader records the
/// epoch as completed (the next arrive's sync orders that store before its reads).
template <class G>
IRIS_DEVICE_FN IRIS_FORCEINLINE void wait_on(G group, const Context& ctx, const Barriers& bars,
                                             barrier_token token, const char* operation,
                                             Awaited awaited) {
  check_channel(ctx, bars, token.channel, operation);
  std::uint64_t* state = bars.slots(token.channel);
  const std::uint64_t* slots = state + kEpochSlots;
  const iris::team& t = bars.team();
  const int n = static_cast<int>(group.num_threads());
  const int first = static_cast<int>(group.thread_rank());
  if (ctx.debug_checks() && first == 0) check_wait(ctx, state, token, operation);
  for (int i = first; i < t.size; i += n) {
    wait_for<cuda::memory_order_acquire, cuda::thread_scope_system>(
        ctx, operation, slots + i, ctx.rank(), cmp::ge, token.epoch,
        {.what = awaited,
         .rank = t.world_rank(i),
         .channel = token.channel,
         .team_start = t.start,
         .team_size = t.size,
         .team_stride = t.stride});
  }
  group_sync(group, ctx, operation);
  if (first == 0) relaxed_cta::store(state, token.epoch);
}

/// The calling block meets the world on a reserved channel (the grid barrier's block 0,
/// device_barrier). Every thread of the block calls it.
IRIS_DEVICE_FN inline void meet_ranks(const Context& ctx, BarrierChannel* channel,
                                      const char* operation) {
  const Barriers bars = world_barriers(ctx, channel, 1, operation);
  wait_on(iris::block{}, ctx, bars, arrive_on(iris::block{}, ctx, bars, 0, operation), operation,
          Awaited::kRank);
}

/// arrive_on at an epoch the caller chooses instead of the channel's next one: for users that
/// number their rounds themselves (iris::ccl: the call's epoch and the step within the call), so
/// that a channel may sit out some rounds and every member still agrees on what it waits for.
/// `epoch` must be above every epoch this rank arrived at on the channel before; it also becomes
/// the channel's local epoch, so a later arrive_on continues above it. wait_on waits for it.
template <class G>
IRIS_DEVICE_FN IRIS_FORCEINLINE barrier_token arrive_at(G group, const Context& ctx,
                                                        const Barriers& bars, int channel,
                                                        std::uint64_t epoch,
                                                        const char* operation) {
  check_channel(ctx, bars, channel, operation);
  std::uint64_t* state = bars.slots(channel);
  std::uint64_t* slots = state + kEpochSlots;
  // Publishes every member's earlier writes with the releases below (signal.hpp, rule (b)).
  group_sync(group, ctx, operation);
  const iris::team& t = bars.team();
  const int n = static_cast<int>(group.num_threads());
  const int first = static_cast<int>(group.thread_rank());
  if (first == 0) relaxed_cta::store(state, epoch);
  for (int i = first; i < t.size; i += n)
    release_sys::store(ctx.translate_unchecked(slots + bars.member(), t.world_rank(i)), epoch);
  return {channel, epoch};
}

}  // namespace iris::device::detail

namespace iris::device {

template <synchronizable_group G>
IRIS_DEVICE_FN barrier_token arrive(G group, const Context& ctx, const Barriers& bars,
                                    int channel) {
  return detail::arrive_on(group, ctx, bars, channel, "barrier arrive");
}

template <synchronizable_group G>
IRIS_DEVICE_FN void wait(G group, const Context& ctx, const Barriers& bars, barrier_token token) {
  detail::wait_on(group, ctx, bars, token, "barrier wait", detail::Awaited::kChannelRank);
}

template <synchronizable_group G>
IRIS_DEVICE_FN void sync(G group, const Context& ctx, const Barriers& bars, int channel) {
  detail::wait_on(group, ctx, bars, detail::arrive_on(group, ctx, bars, channel, "barrier sync"),
                  "barrier sync", detail::Awaited::kChannelRank);
}

IRIS_DEVICE_FN inline void barrier(block, const Context& ctx) {
  const std::size_t index = detail::linear_block_index();
  if (index >= detail::kBarrierMaxBlocks) {
    detail::report_and_trap(ctx, {.kind = detail::ErrorKind::kTooManyBlocks,
                                  .operation = "barrier(block)",
                                  .target_rank = ctx.rank(),
                                  .expected = detail::kBarrierMaxBlocks,
                                  .observed = index});
  }
  // Channel b of the world's block-barrier object, which the host Context made when it started.
  const Barriers bars(ctx.block_barriers(), iris::team::world(ctx.world_size()),
                      detail::kBarrierMaxBlocks, detail::channel_slots(ctx.world_size()),
                      ctx.rank());
  const int channel = static_cast<int>(index);
  detail::wait_on(iris::block{}, ctx, bars,
                  detail::arrive_on(iris::block{}, ctx, bars, channel, "barrier(block)"),
                  "barrier(block)", detail::Awaited::kRank);
}

IRIS_DEVICE_FN inline void barrier(grid, const Context& ctx) {
  // Blocks 1.. count themselves in on this rank and wait for block 0 to release them; block 0
  // waits for their count, meets the other ranks, then releases. The count goes back to zero
  // before the release, and the release epoch only grows: nothing to reset between barriers.
  detail::GridBarrierCounters* state = detail::grid_barrier_counters(ctx);
  const bool leader_thread = detail::linear_thread_index() == 0;
  __syncthreads();
  if (detail::linear_block_index() == 0) {
    const std::uint64_t others = detail::blocks_per_grid() - 1;
    if (leader_thread && others > 0) {
      detail::wait_for<cuda::memory_order_acquire, cuda::thread_scope_system>(
          ctx, "barrier(grid)", &state->blocks_arrived, ctx.rank(), cmp::eq, others,
          {.what = detail::Awaited::kGridBlocks});
      detail::relaxed_sys::store(&state->blocks_arrived, std::uint64_t{0});
    }
    detail::meet_ranks(ctx, detail::world_channel(ctx, detail::kGridChannel), "barrier(grid)");
    if (leader_thread)
      detail::release_sys::store(&state->released, detail::relaxed_sys::load(&state->released) + 1);
  } else if (leader_thread) {
    const std::uint64_t released = detail::relaxed_sys::load(&state->released);
    detail::release_sys::reduce_add(&state->blocks_arrived, std::uint64_t{1});
    detail::wait_for<cuda::memory_order_acquire, cuda::thread_scope_system>(
        ctx, "barrier(grid)", &state->released, ctx.rank(), cmp::gt, released,
        {.what = detail::Awaited::kGridRelease});
  }
  __syncthreads();
}

}  // namespace iris::device
