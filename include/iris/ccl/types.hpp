// The vocabulary of iris::ccl: element types, reductions, collectives, algorithms, and the
// per-call Options. Plain host C++ (the device side reads the same enums).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace iris::ccl {

/// Element types of the reducing collectives. Movement-only collectives take any trivially
/// copyable type and move its bytes.
enum class DataType : int { kFloat32, kFloat16, kBFloat16, kInt32, kInt64, kUInt8 };

/// sum, prod, min, max and avg (the sum divided by the team size; integers truncate toward
/// zero). Half-precision and bfloat16 inputs are reduced in fp32 and rounded once at the end;
/// integers are reduced in 64 bits (sum and prod wrap as the element type does).
enum class ReduceOp : int { kSum, kProd, kMin, kMax, kAvg };

enum class Collective : int {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kAllToAll,
  kAllToAllv,
  kBroadcast,
  kReduce,
  kGather,
  kScatter,
  kSendRecv,
  kBarrier,
};
inline constexpr int kCollectiveCount = 11;

/// How a collective moves its data (docs/ccl.md has a who-sends-what diagram of each).
enum class Algorithm : int {
  /// The selection table decides (IRIS_CCL_TUNING, IRIS_CCL_ALGORITHM).
  kAuto,
  /// all_reduce: every rank sends its whole input to every rank in packets (flag in data, no
  /// separate flag round trip); each rank reduces all of it.
  kOneShot,
  /// all_reduce: every rank reads every rank's input through translate and reduces it; out of
  /// place only.
  kOneShotPull,
  /// all_reduce: every rank writes its whole input, plain, into its row of every other rank's
  /// staging, the team meets once (which orders those writes), and each rank reduces its rows
  /// from its own memory: the one-shot's single hop with no flag in the data, for one barrier.
  kOneShotPush,
  /// all_reduce: reduce-scatter (rank k reduces shard k) then all-gather (rank k pushes its
  /// reduced shard to every rank).
  kTwoShot,
  /// all_reduce: the two-shot's reduce-scatter and all-gather, both in packets: no barrier, and
  /// 2 (n - 1) / n of the message stored per rank in packets against the one-shot's n - 1, for
  /// one more hop.
  kTwoShotPackets,
  /// Movement, reduce_scatter and reduce: each rank reads what it needs from peers (reduce:
  /// the root reads every member's input and reduces all of it).
  kPull,
  /// all_gather: each rank writes its part into every rank's output; all_to_all: each rank
  /// writes part k of its input into member k's output; gather: each rank writes its part
  /// into the root's output; reduce: rank k reduces shard k of every member's input and writes
  /// it into the root's output (gather, reduce: every member's blocks work, not the root's
  /// alone).
  kPush,
  /// all_gather, pipelined: in step s (of size - 1) each rank pulls from its left neighbour the
  /// part that neighbour received in step s - 1 (its own in step 0), so every rank reads from
  /// one peer only and each step moves 1/size; reduce_scatter: in step s each rank adds its
  /// input to the partial sums of part (rank - 2 - s) its left neighbour staged, chunk by chunk,
  /// and stages them for its right neighbour (its own part, finished, in the last step).
  kRing,
};
inline constexpr int kAlgorithmCount = 9;

/// Per-call choices; the defaults let the communicator decide.
struct Options {
  Algorithm algorithm = Algorithm::kAuto;
  /// Blocks (SM budget) the call may use at most; 0: the communicator's default (its SM budget,
  /// see CommunicatorOptions::max_blocks). The call may use fewer for small messages. More
  /// than Communicator::block_limit(collective) is an iris::Error.
  int max_blocks = 0;
  /// Bytes one block handles per call at least before another block is added; 0: the default
  /// for the algorithm. Smaller spreads small messages over more blocks.
  std::size_t chunk_bytes = 0;
};

std::string_view to_string(DataType type) noexcept;
std::string_view to_string(ReduceOp op) noexcept;
std::string_view to_string(Collective collective) noexcept;
std::string_view to_string(Algorithm algorithm) noexcept;

/// Bytes per element.
constexpr std::size_t size_of(DataType type) noexcept {
  switch (type) {
    case DataType::kFloat32:
    case DataType::kInt32:
      return 4;
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return 2;
    case DataType::kInt64:
      return 8;
    case DataType::kUInt8:
      return 1;
  }
  return 0;
}

/// The DataType of a C++ element type: float, __half, __nv_bfloat16, std::int32_t,
/// std::int64_t, std::uint8_t.
template <class T>
inline constexpr bool kHasDataType =
    std::is_same_v<T, float> || std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16> ||
    std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t> ||
    std::is_same_v<T, std::uint8_t>;

template <class T>
constexpr DataType data_type_of() {
  static_assert(kHasDataType<T>,
                "iris::ccl: reductions take float, __half, __nv_bfloat16, std::int32_t, "
                "std::int64_t or std::uint8_t");
  if constexpr (std::is_same_v<T, float>) return DataType::kFloat32;
  if constexpr (std::is_same_v<T, __half>) return DataType::kFloat16;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return DataType::kBFloat16;
  if constexpr (std::is_same_v<T, std::int32_t>) return DataType::kInt32;
  if constexpr (std::is_same_v<T, std::int64_t>) return DataType::kInt64;
  return DataType::kUInt8;
}

}  // namespace iris::ccl
