// Where the world barriers (barrier(block, ctx), barrier(grid, ctx), Context::device_barrier)
// keep their state: at the start of every rank's heap, inside the kReservedHeapBytes that the
// host zeroes when it makes the heap. Barrier objects (iris::Context::make_barriers) keep theirs
// in memory of their own, sized for their team. Not public.
//
// Every barrier is an exchange of epochs over a *channel*: on every member's rank, a line with
// the epoch this rank last arrived at (read and written only by the group of this rank that
// uses the channel), then one arrival slot per team member; member i stores the epoch it has
// reached into slot i on every member. Epochs only grow (64 bits
// never wrap), so a barrier never resets anything: it survives kernel boundaries and CUDA-graph
// replays as it is.
//
//   heap offset 0: BarrierState
//     grid                 whole-grid barrier: local block count, local release epoch, and the
//                          channel block 0 uses to meet the other ranks
//     device_barrier       channel of iris::Context::device_barrier (host launched)
//     blocks[b]            channel of barrier(block, ctx) run by block b
#pragma once

#include <cstddef>
#include <cstdint>

#include "iris/device/detail/config.hpp"

namespace iris::device::detail {

/// World size up to which the world barriers have arrival slots (barrier objects have no limit).
inline constexpr int kBarrierMaxRanks = 128;
/// Blocks (linear block index) that may run barrier(block, ctx).
inline constexpr int kBarrierMaxBlocks = 512;

/// One 128-byte line per independently written word.
inline constexpr std::size_t kLine = 128;
/// Arrival slots are padded to whole lines per channel.
inline constexpr int kSlotsPerLine = static_cast<int>(kLine / sizeof(std::uint64_t));

/// Slots before a channel's arrival slots: the line of its local epoch.
inline constexpr int kEpochSlots = kSlotsPerLine;

struct alignas(kLine) BarrierChannel {
  std::uint64_t epoch;  ///< the epoch this rank last arrived at on the channel
  std::byte unused[kLine - sizeof(std::uint64_t)];
  std::uint64_t arrived[kBarrierMaxRanks];  ///< arrived[r]: the newest epoch rank r reached
};
static_assert(offsetof(BarrierChannel, arrived) == kEpochSlots * sizeof(std::uint64_t));

struct alignas(kLine) GridBarrierState {
  std::uint64_t blocks_arrived;  ///< blocks (other than block 0) in the current grid barrier
  std::byte unused0[kLine - sizeof(std::uint64_t)];
  std::uint64_t released;  ///< grid barriers block 0 has released on this rank
  std::byte unused1[kLine - sizeof(std::uint64_t)];
  BarrierChannel ranks;  ///< block 0 meets the other ranks here
};

struct BarrierState {
  GridBarrierState grid;
  BarrierChannel device_barrier;
  BarrierChannel blocks[kBarrierMaxBlocks];
};

/// Heap offset of the BarrierState (the same on every rank).
inline constexpr std::size_t kBarrierStateOffset = 0;

static_assert(kBarrierStateOffset + sizeof(BarrierState) <= kReservedHeapBytes,
              "the barrier state must fit in the heap's reserved bytes");

}  // namespace iris::device::detail
