// Where the cross-rank barriers keep their state: at the start of every rank's heap, inside the
// kReservedHeapBytes that the host zeroes when it makes the heap. Not public.
//
// Every barrier is an exchange of epochs over a *channel*: a rank's channel holds the epoch it
// has completed (written by that rank only) and one arrival slot per peer, in which the peer
// stores the epoch it has reached. Epochs only grow (64 bits never wrap), so a barrier never
// resets anything: it survives kernel boundaries and CUDA-graph replays as it is.
//
//   heap offset 0: BarrierState
//     grid                 whole-grid barrier: local block count, local release epoch, and the
//                          channel block 0 uses to meet the other ranks
//     device_barrier       channel of iris::Context::device_barrier (host launched)
//     blocks[b]            channel of block-level barriers run by block b
#pragma once

#include <cstddef>
#include <cstdint>

#include "iris/device/detail/config.hpp"

namespace iris::device::detail {

/// Ranks the barriers have arrival slots for.
inline constexpr int kBarrierMaxRanks = 64;
/// Blocks (linear block index) that may run block-level barriers.
inline constexpr int kBarrierMaxBlocks = 512;

/// One 128-byte line per independently written word, so that peers' arrivals do not bounce the
/// owner's epoch line.
inline constexpr std::size_t kLine = 128;

struct alignas(kLine) BarrierChannel {
  std::uint64_t epoch;  ///< barriers this rank completed on the channel; only it writes this
  std::byte unused[kLine - sizeof(std::uint64_t)];
  std::uint64_t arrived[kBarrierMaxRanks];  ///< arrived[r]: the newest epoch rank r reached
};

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
