// What the host side of iris::ccl hands its kernels, and the launchers (src/ccl/*.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "iris/ccl/handle.hpp"
#include "iris/ccl/types.hpp"

namespace iris::ccl::detail {

/// Threads per block the kernels are compiled for at most (CommunicatorOptions::threads).
inline constexpr int kMaxThreads = 512;

/// 16-byte vectors each thread of the movement kernel keeps in flight by default (4 and 8 are
/// compiled; IRIS_CCL_MOVE_VECTORS picks): 8, twice the device API's default, so that a
/// 256-thread block has 32 KiB of loads outstanding.
inline constexpr int kMoveInFlight = 8;
inline constexpr const char* kMoveVectorsEnv = "IRIS_CCL_MOVE_VECTORS";

enum class ReduceKind : int {
  kAllReducePull,
  kAllReducePush,
  kAllReduceTwoShot,
  kReduceScatter,
  kReduce,
  kReduceScatterRing,
  kReducePush,  ///< reduce: member k reduces shard k of the elements into the root's dst
};

struct ReduceParams {
  device::Communicator comm;
  ReduceKind kind;
  ReduceOp op;
  void* dst;
  const void* src;
  std::size_t count;  ///< elements (per member part for reduce_scatter)
  std::size_t tile;   ///< elements per block
  int root;           ///< team index (reduce)
  void* staging;      ///< this rank's staging (workspace.hpp): the ring's and the push's
  std::size_t slot;   ///< ring reduce_scatter: accumulators per staging slot
  std::size_t row;    ///< one-shot push: bytes of one sender's staging row (push_row_bytes)
};

/// The all_reduces in packets (workspace.hpp has their slots' layout).
struct PacketParams {
  device::Communicator comm;
  ReduceOp op;
  void* dst;
  const void* src;
  std::size_t count;
  std::size_t tile_packets;      ///< packets per block
  std::size_t slots_per_sender;  ///< packets of one sender in one parity of the one-shot
  bool two_shot;                 ///< the two-shot in packets; the one-shot otherwise
  std::size_t chunk_words;       ///< two-shot: two_shot_chunk_words of the message
  std::size_t results_slots;     ///< two-shot: TwoShotSlots of the communicator
  std::size_t contribution_slots;
};

enum class MoveKind : int {
  kAllGatherPull,
  kAllGatherPush,
  kAllToAll,
  kAllToAllv,
  kBroadcast,
  kGather,
  kScatter,
  kSend,
  kRecv,
  kBarrier,  ///< launch_barrier's kernel: the code of its argument check
  kAllGather2d,
  kAllGatherRing,
  kAllToAllPush,
  kGatherPush,  ///< the last: kMoveKinds below counts through it
};
inline constexpr int kMoveKinds = static_cast<int>(MoveKind::kGatherPush) + 1;

struct MoveParams {
  device::Communicator comm;
  MoveKind kind;
  std::byte* dst;
  const std::byte* src;
  std::size_t bytes;  ///< bytes of one part
  std::size_t tile;   ///< bytes per block (all_to_allv: computed per peer on the device)
  int root;           ///< team index
  int peer;           ///< world rank (send/recv)
  const std::int64_t* recv_counts;
  const std::int64_t* recv_offsets;
  const std::int64_t* send_counts;
  const std::int64_t* send_offsets;
  std::size_t element_bytes;
  std::size_t rows;       ///< all_gather_2d: rows of a part (`bytes` is then bytes per row);
  std::size_t dst_pitch;  ///< bytes between dst's rows
  std::size_t src_pitch;  ///< bytes between src's rows
  int in_flight = kMoveInFlight;  ///< 16-byte vectors per thread in flight: 4 or 8
};

void launch_reduce(const ReduceParams& params, DataType type, int blocks, int threads,
                   cudaStream_t stream);
void launch_all_reduce_packets(const PacketParams& params, DataType type, int blocks, int threads,
                               cudaStream_t stream);
void launch_move(const MoveParams& params, int blocks, int threads, cudaStream_t stream);
/// One warp meets every member of the team (the barrier collective).
void launch_barrier(const device::Communicator& comm, cudaStream_t stream);

/// Blocks of `threads` threads of the reducing (movement) kernels that one multiprocessor holds
/// at once, the smallest over the element types: what the SM budget is sized by.
int resident_reduce_blocks(int threads);
int resident_move_blocks(int threads);

}  // namespace iris::ccl::detail
