// How a call of iris::ccl is shaped: which algorithm runs it, on how many blocks, in what chunks.
// Plain host C++ over numbers (no CUDA, no Context), so that the CPU tests run every rule.
//
// The algorithm, strongest first: Options::algorithm, IRIS_CCL_ALGORITHM (Selector::forced), the
// first entry of the selection table that can run the call, the fallback. A forced algorithm that
// cannot run the call is an iris::Error; a table entry that cannot is skipped.
// The blocks: Options::max_blocks (up to block_limit), else the table entry's (up to the SM
// budget), else the budget; fewer when the message has fewer chunks than that.
#pragma once

#include <cstddef>

#include "iris/ccl/communicator.hpp"
#include "iris/ccl/tuning.hpp"
#include "iris/ccl/types.hpp"

namespace iris::ccl::detail {

/// The all_reduces whose data travels in packets (bounded by CommunicatorOptions::packet_bytes).
constexpr bool in_packets(Algorithm a) {
  return a == Algorithm::kOneShot || a == Algorithm::kTwoShotPackets;
}

/// The all_reduces whose messages are stored in the workspace, so bounded by its size.
constexpr bool bounded(Algorithm a) {
  return in_packets(a) || a == Algorithm::kOneShotPush;
}

/// The collectives of the reducing kernels (their own SM budget and block limit).
constexpr bool reduces(Collective c) {
  return c == Collective::kAllReduce || c == Collective::kReduceScatter || c == Collective::kReduce;
}

/// Bytes a block handles at least before the next block is added, by default.
inline constexpr std::size_t kDefaultChunkBytes = std::size_t{64} << 10;
/// The one-shots' (packets and push): one packet (8 payload bytes) per thread of a default
/// 256-thread block, so that each thread's wait is one read of every member's packet
/// (reduce_kernels.cu) and a message spreads over more blocks rather than over more packets per
/// thread; the push, a latency algorithm too, spreads the same way.
inline constexpr std::size_t kDefaultOneShotChunkBytes = std::size_t{2} << 10;
/// The largest all_reduce the fallback gives to the one-shot in packets.
inline constexpr std::size_t kFallbackOneShotBytes = std::size_t{256} << 10;

struct Plan {
  Algorithm algorithm = Algorithm::kAuto;
  int blocks = 1;
  std::size_t chunk = 0;
};

/// Everything a communicator decides a call's shape from, fixed when it is made.
struct Selector {
  int team_size = 1;
  std::size_t packet_bytes = 0;   ///< CommunicatorOptions::packet_bytes
  std::size_t staging_bytes = 0;  ///< CommunicatorOptions::staging_bytes
  int max_blocks = 1;             ///< SM budget of the reducing collectives
  int move_max_blocks = 1;        ///< SM budget of the others
  int block_limit = 1;            ///< blocks of a reducing call that can all be resident
  int move_block_limit = 1;       ///< the same for the others
  TuningTable table;
  ForcedAlgorithms forced{};  ///< IRIS_CCL_ALGORITHM (kAuto: not forced)

  int budget(Collective c) const { return reduces(c) ? max_blocks : move_max_blocks; }
  int limit(Collective c) const { return reduces(c) ? block_limit : move_block_limit; }

  /// Communicator::message_capacity (0 for the algorithms it does not bound).
  std::size_t message_capacity(Algorithm algorithm) const;
  /// Why `algorithm` cannot run a call of `c` of `bytes` bytes per member part, or null.
  const char* unfit(Collective c, Algorithm algorithm, std::size_t bytes, bool in_place) const;
  /// What runs a call that nothing forces and no table entry takes.
  Algorithm fallback(Collective c, std::size_t bytes, bool in_place) const;
  /// The call's shape; throws iris::Error naming `call` for an Options::max_blocks out of range
  /// and for a forced algorithm that cannot run it.
  Plan plan(Collective c, std::size_t bytes, const Options& options, bool in_place,
            const char* call) const;
};

}  // namespace iris::ccl::detail
