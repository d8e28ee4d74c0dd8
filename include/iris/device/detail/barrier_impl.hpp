// Bodies behind iris/device/barrier.hpp. Not public.
#pragma once

#include "iris/device/barrier.hpp"
#include "iris/device/detail/barrier_state.hpp"
#include "iris/device/detail/ptx.hpp"
#include "iris/device/detail/report.hpp"
#include "iris/device/detail/wait.hpp"

namespace iris::device::detail {

using release_sys = ptx<cuda::memory_order_release, cuda::thread_scope_system>;
using relaxed_sys = ptx<cuda::memory_order_relaxed, cuda::thread_scope_system>;
// A channel's local epoch is read and written by the one group of this rank that uses the
// channel (kernel boundaries, or whatever synchronization hands the channel on, order the rest).
using relaxed_cta = ptx<cuda::memory_order_relaxed, cuda::thread_scope_block>;

IRIS_DEVICE_FN IRIS_FORCEINLINE BarrierState* barrier_state(const Context& ctx) {
  return reinterpret_cast<BarrierState*>(ctx.heap_base() + kBarrierStateOffset);
}

/// The world's reserved channels starting at `channel` (one BarrierChannel each).
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
                  static_cast<int>(sizeof(BarrierChannel) / sizeof(std::uint64_t)), ctx.rank());
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

/// arrive() under the caller's name. Every member reads the channel's local epoch before the
/// group syncs, and the leader stores the new one after the sync, so no member reads an epoch
/// this call has already advanced (the wait's final sync orders it before the next arrive).
template <class G>
IRIS_DEVICE_FN IRIS_FORCEINLINE barrier_token arrive_on(G group, const Context& ctx,
                                                        const Barriers& bars, int channel,
                                                        const char* operation) {
  check_channel(ctx, bars, channel, operation);
  std::uint64_t* state = bars.slots(channel);
  std::uint64_t* slots = state + kEpochSlots;
  const int me = bars.member();
  const std::uint64_t epoch = relaxed_cta::load(state) + 1;
  // Publishes every member's earlier writes with the releases below (signal.hpp, rule (b)).
  group.sync();
  const iris::team& t = bars.team();
  const int n = static_cast<int>(group.num_threads());
  const int first = static_cast<int>(group.thread_rank());
  if (first == 0) relaxed_cta::store(state, epoch);
  for (int i = first; i < t.size; i += n)
    release_sys::store(ctx.translate_unchecked(slots + me, t.world_rank(i)), epoch);
  return {channel, epoch};
}

/// wait() under the caller's name: member k of the group waits for team members k, k + n, ...;
/// the final sync hands what they acquired to the whole group.
template <class G>
IRIS_DEVICE_FN IRIS_FORCEINLINE void wait_on(G group, const Context& ctx, const Barriers& bars,
                                             barrier_token token, const char* operation,
                                             Awaited awaited) {
  check_channel(ctx, bars, token.channel, operation);
  const std::uint64_t* slots = bars.slots(token.channel) + kEpochSlots;
  const iris::team& t = bars.team();
  const int n = static_cast<int>(group.num_threads());
  for (int i = static_cast<int>(group.thread_rank()); i < t.size; i += n) {
    wait_for<cuda::memory_order_acquire, cuda::thread_scope_system>(
        ctx, operation, slots + i, ctx.rank(), cmp::ge, token.epoch,
        {.what = awaited, .rank = t.world_rank(i), .channel = token.channel});
  }
  group.sync();
}

/// The calling block meets the world on a reserved channel (barrier(block), the grid barrier's
/// block 0, device_barrier). Every thread of the block calls it.
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
  group.sync();
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
  detail::meet_ranks(ctx, &detail::barrier_state(ctx)->blocks[index], "barrier(block)");
}

IRIS_DEVICE_FN inline void barrier(grid, const Context& ctx) {
  // Blocks 1.. count themselves in on this rank and wait for block 0 to release them; block 0
  // waits for their count, meets the other ranks, then releases. The count goes back to zero
  // before the release, and the release epoch only grows: nothing to reset between barriers.
  detail::GridBarrierState* state = &detail::barrier_state(ctx)->grid;
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
    detail::meet_ranks(ctx, &state->ranks, "barrier(grid)");
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
