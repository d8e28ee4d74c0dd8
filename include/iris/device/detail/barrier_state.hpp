// Where the barriers keep their state. Not public.
//
// barrier(grid, ctx) and Context::device_barrier use world channels at the start of every rank's
// heap, inside the kReservedHeapBytes that the host zeroes when it makes the heap. Barrier
// objects (iris::Context::make_barriers) keep theirs in heap memory of their own, sized for their
// team (channel_slots). barrier(block, ctx) is a barrier object too: the host Context makes one
// for the world with kBarrierMaxBlocks channels when it starts, and block b uses channel b.
//
// Every barrier is an exchange of epochs over a *channel*: on every member's rank, a line with
// the epoch this rank last completed on the channel (read and written only by the group of this
// rank that uses the channel), then one arrival slot per team member; member i stores the epoch
// it has reached into slot i on every member. Epochs only grow (64 bits never wrap), so a
// barrier never resets anything: it survives kernel boundaries and CUDA-graph replays as it is.
//
//   heap offset 0: GridBarrierCounters   the grid barrier's local block count and release epoch
//   then the world channels, world_channel_slots(world size) words each:
//     kGridChannel                       block 0 of a grid barrier meets the other ranks here
//     kDeviceBarrierChannel              iris::Context::device_barrier (host launched)
//
// A world channel has arrival lines for the world's size, and never fewer than four (64 ranks):
// up to 64 ranks every line sits where it sat when the world barriers stopped at 64 ranks. Where
// these few lines lie decides which part of the L2 cache peers' arrivals land in, and with it
// the barrier's latency (visible when ranks share one GPU), so the layout up to 64 ranks stays
// fixed; larger worlds get wider channels.
#pragma once

#include <cstddef>
#include <cstdint>

#include "iris/device/detail/config.hpp"

namespace iris::device::detail {

/// World size up to which the reserved world channels (barrier(grid, ctx), device_barrier) have
/// arrival slots; barrier objects, barrier(block, ctx) included, have no limit.
inline constexpr int kBarrierMaxRanks = 128;
/// Blocks (linear block index) that may run barrier(block, ctx): the channels of the world's
/// block-barrier object.
inline constexpr int kBarrierMaxBlocks = 512;

/// One 128-byte line per independently written word.
inline constexpr std::size_t kLine = 128;
/// Arrival slots are padded to whole lines per channel.
inline constexpr int kSlotsPerLine = static_cast<int>(kLine / sizeof(std::uint64_t));

/// Slots before a channel's arrival slots: the line of its local epoch. Word 0 is the epoch this
/// rank last completed; with debug checks on, word 1 is the epoch of an arrive() whose wait() has
/// not come yet (iris/device/debug.hpp).
inline constexpr int kEpochSlots = kSlotsPerLine;

/// Words of one world channel for a world of `world` ranks: the epoch line, then the arrival
/// slots in whole lines, at least four.
IRIS_HOST_DEVICE constexpr int world_channel_slots(int world) {
  const int lines = (world + kSlotsPerLine - 1) / kSlotsPerLine;
  return kEpochSlots + (lines < 4 ? 4 : lines) * kSlotsPerLine;
}

/// Words of one channel of a barrier object for a team of `team_size` ranks: the epoch line,
/// then the arrival slots in whole lines, so that channels never share a line.
IRIS_HOST_DEVICE constexpr int channel_slots(int team_size) {
  return kEpochSlots + (team_size + kSlotsPerLine - 1) / kSlotsPerLine * kSlotsPerLine;
}

/// A world channel's first word (its local epoch); world_barriers() views it as a Barriers.
struct BarrierChannel {
  std::uint64_t epoch;
};

struct alignas(kLine) GridBarrierCounters {
  std::uint64_t blocks_arrived;  ///< blocks (other than block 0) in the current grid barrier
  std::byte unused0[kLine - sizeof(std::uint64_t)];
  std::uint64_t released;  ///< grid barriers block 0 has released on this rank
  std::byte unused1[kLine - sizeof(std::uint64_t)];
};

/// The world channels, in order after the grid counters.
inline constexpr int kGridChannel = 0;
inline constexpr int kDeviceBarrierChannel = 1;
inline constexpr int kWorldChannels = 2;

/// Heap offset of the grid counters, then of the first world channel (the same on every rank).
inline constexpr std::size_t kBarrierStateOffset = 0;
inline constexpr std::size_t kWorldChannelsOffset =
    kBarrierStateOffset + sizeof(GridBarrierCounters);

static_assert(kWorldChannelsOffset + std::size_t{kWorldChannels} *
                                         world_channel_slots(kBarrierMaxRanks) *
                                         sizeof(std::uint64_t) <=
                  kReservedHeapBytes,
              "the world barriers' state must fit in the heap's reserved bytes");
static_assert(kWorldChannelsOffset % kLine == 0 &&
                  world_channel_slots(1) * sizeof(std::uint64_t) % kLine == 0,
              "world channels start on lines");

}  // namespace iris::device::detail
