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
// Only the block that owns a channel reads and writes its epoch (kernel boundaries order the rest).
using relaxed_cta = ptx<cuda::memory_order_relaxed, cuda::thread_scope_block>;

IRIS_DEVICE_FN IRIS_FORCEINLINE BarrierState* barrier_state(const Context& ctx) {
  return reinterpret_cast<BarrierState*>(ctx.heap_base() + kBarrierStateOffset);
}

/// The calling block meets the same channel on every rank. Every thread of the block calls it,
/// after a __syncthreads() that follows the writes it publishes. Thread t announces the new
/// epoch to peers t, t + blockDim, ... (release, so the whole block's earlier writes come first)
/// and waits for their announcements here (acquire); a final __syncthreads() hands what they
/// acquired to the whole block.
IRIS_DEVICE_FN inline void meet_ranks(const Context& ctx, BarrierChannel* channel,
                                      const char* operation) {
  const int world = ctx.world_size();
  if (world > kBarrierMaxRanks) {
    report_and_trap(ctx, {.kind = ErrorKind::kTooManyRanks,
                          .operation = operation,
                          .target_rank = ctx.rank(),
                          .expected = kBarrierMaxRanks,
                          .observed = static_cast<std::uint64_t>(world)});
  }
  const int me = ctx.rank();
  const std::uint64_t epoch = relaxed_cta::load(&channel->epoch) + 1;
  const int first = static_cast<int>(iris::detail::linear_thread_index());
  const int step = static_cast<int>(iris::detail::threads_per_block());
  for (int peer = first; peer < world; peer += step)
    release_sys::store(&ctx.translate(channel, peer)->arrived[me], epoch);
  for (int peer = first; peer < world; peer += step) {
    wait_for<cuda::memory_order_acquire, cuda::thread_scope_system>(
        ctx, operation, &channel->arrived[peer], me, cmp::ge, epoch,
        {.what = Awaited::kRank, .rank = peer});
  }
  __syncthreads();
  if (first == 0) relaxed_cta::store(&channel->epoch, epoch);
}

}  // namespace iris::device::detail

namespace iris::device {

IRIS_DEVICE_FN inline void barrier(block, const Context& ctx) {
  const std::size_t index = iris::detail::linear_block_index();
  if (index >= detail::kBarrierMaxBlocks) {
    detail::report_and_trap(ctx, {.kind = detail::ErrorKind::kTooManyBlocks,
                                  .operation = "barrier(block)",
                                  .target_rank = ctx.rank(),
                                  .expected = detail::kBarrierMaxBlocks,
                                  .observed = index});
  }
  __syncthreads();
  detail::meet_ranks(ctx, &detail::barrier_state(ctx)->blocks[index], "barrier(block)");
}

IRIS_DEVICE_FN inline void barrier(grid, const Context& ctx) {
  // Blocks 1.. count themselves in on this rank and wait for block 0 to release them; block 0
  // waits for their count, meets the other ranks, then releases. The count goes back to zero
  // before the release, and the release epoch only grows: nothing to reset between barriers.
  detail::GridBarrierState* state = &detail::barrier_state(ctx)->grid;
  const bool leader_thread = iris::detail::linear_thread_index() == 0;
  __syncthreads();
  if (iris::detail::linear_block_index() == 0) {
    const std::uint64_t others = iris::detail::blocks_per_grid() - 1;
    if (leader_thread && others > 0) {
      detail::wait_for<cuda::memory_order_acquire, cuda::thread_scope_system>(
          ctx, "barrier(grid)", &state->blocks_arrived, ctx.rank(), cmp::eq, others,
          {.what = detail::Awaited::kGridBlocks});
      detail::relaxed_sys::store(&state->blocks_arrived, std::uint64_t{0});
    }
    __syncthreads();
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
