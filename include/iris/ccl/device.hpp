// Tile collectives: the algorithms of iris::ccl as functions a kernel calls on its own tiles,
// so that communication can sit inside a compute kernel (the fused ops build on these), as ROCm
// Iris's iris.x. The host collectives are kernels made of the same calls.
//
//   __global__ void my_kernel(const __grid_constant__ iris::ccl::device::Communicator comm,
//                             float* out, const float* partial, std::size_t n) {
//     const std::uint64_t epoch = iris::ccl::device::begin(comm);
//     // ... compute this block's tile of `partial` ...
//     iris::ccl::device::all_reduce(iris::block{}, comm, {epoch, int(blockIdx.x), 0},
//                                   out + tile0, partial + tile0, tile_n,
//                                   iris::ccl::ReduceOp::kSum);
//     iris::ccl::device::end(comm, epoch);
//   }
//
// Rules, for every call:
//   - The whole block calls (the group is iris::block), and block c of every team member makes
//     the same call with the same counts: the call's Round names channel c (0 <= c < 128; a block
//     index is the natural choice) and the step within the kernel (0, 1, ... below 128): two
//     calls of one block in one kernel take different steps (a step of 128 or more is reported
//     and traps).
//   - The epoch comes from begin(comm) at the start of the kernel, and every thread of the grid
//     calls end(comm, epoch) once at its end. A kernel that calls tile collectives is one call
//     of the team's collectives: every member runs it, in the same order as the host calls on
//     the same communicator, and on one stream at a time.
//   - dst and src are this rank's copies of symmetric buffers (heap pointers); the call
//     translates them to the members it reads or writes.
// Ordering: when a call returns, the block's result is in dst on this rank (on every rank for
// the calls whose result goes everywhere, once their blocks have returned too), and every rank
// has finished reading this rank's src: both may be reused.
// Spinning: a call waits (bounded by the context's wait timeout) for the same block of every
// member. Blocks of ranks that share a GPU must therefore be resident at the same time: launch
// at most (blocks the GPU holds at once) / (ranks on the GPU).
#pragma once

#include <cstddef>
#include <cstdint>

#include "iris/ccl/handle.hpp"
#include "iris/ccl/types.hpp"
#include "iris/device/coop.hpp"

namespace iris::ccl::device {

/// Which exchange a tile collective is: the kernel's epoch, the block's channel, the step of
/// this call among the block's calls in the kernel.
struct Round {
  std::uint64_t epoch;
  int channel;
  unsigned step;
};

/// Every thread, at the start of a kernel that calls tile collectives: the epoch to pass in
/// their Rounds.
IRIS_DEVICE_FN std::uint64_t begin(const Communicator& comm);

/// Every thread of the grid, once, at the end of that kernel: advances the team's epoch for
/// the next call (the last block to finish does it).
IRIS_DEVICE_FN void end(const Communicator& comm, std::uint64_t epoch);

/// Meets block `round.channel` of every member: everything the block wrote before, on any rank,
/// is visible to every member's block after it.
IRIS_DEVICE_FN void sync(iris::block, const Communicator& comm, Round round);

/// dst[k * count + i] = member k's src[i] for every member k (dst: team.size() * count
/// elements). In place when src == dst + index * count, on every member (then member k's part
/// is read from dst + k * count there). kPull (kAuto) reads from the members, kPush writes into
/// them, kRing reads from the left neighbour only: in step t (of team.size() - 1) the part that
/// neighbour received in its step t - 1 (its own in step 0), after a signal from the
/// neighbour's block on the same channel, so that each step moves one part over one link (as
/// the host all_gather's ring; docs/ccl.md). Another algorithm reports "ccl all_gather: bad
/// algorithm" and traps.
template <class T>
IRIS_DEVICE_FN void all_gather(iris::block, const Communicator& comm, Round round, T* dst,
                               const T* src, std::size_t count,
                               Algorithm algorithm = Algorithm::kPull);

/// dst[i] = op over members k, in team order, of member k's src[index * count + i] (src:
/// team.size() * count elements). In place when dst == src + index * count.
template <class T>
IRIS_DEVICE_FN void reduce_scatter(iris::block, const Communicator& comm, Round round, T* dst,
                                   const T* src, std::size_t count, ReduceOp op);

/// dst[i] = op over members k, in team order, of member k's src[i], on every member.
/// kTwoShot (member k reduces the k-th shard and writes it to everyone; in place allowed) or
/// kOneShotPull (every member reduces everything; out of place only). Another algorithm is
/// reported as "bad algorithm" and traps.
template <class T>
IRIS_DEVICE_FN void all_reduce(iris::block, const Communicator& comm, Round round, T* dst,
                               const T* src, std::size_t count, ReduceOp op,
                               Algorithm algorithm = Algorithm::kTwoShot);

}  // namespace iris::ccl::device

#include "iris/ccl/detail/device_impl.hpp"
