// Barriers across ranks.
//
//   iris::device::barrier(iris::block{}, ctx);   // block b meets block b of every rank
//   iris::device::barrier(iris::grid{}, ctx);    // the whole grid meets every rank's whole grid
//
// Ordering: everything a participating thread wrote before the barrier, to any rank's memory, is
// visible to every participating thread of every rank after it (release/acquire at system scope).
//
// Barriers keep epochs in device memory (the heap's reserved bytes), so they need no reset: the
// same barrier runs any number of times, across kernel launches and CUDA-graph replays. Each
// wait is bounded by ctx.wait_timeout_ns(); when it runs out, the report names what did not
// come: the rank that never arrived and the epochs, or, for a grid barrier, the blocks of the
// grid that never arrived (a grid larger than the GPU holds at once).
// iris::Context::device_barrier(stream) on the host launches a one-block kernel built on the
// block-level barrier.
#pragma once

#include "iris/device/context.hpp"
#include "iris/device/coop.hpp"
#include "iris/device/detail/config.hpp"

namespace iris::device {

/// Block b (linear block index, below 512) of this rank waits until block b of every rank has
/// arrived. Every thread of the block calls it; every rank must run it, the same number of times.
/// A block must not be in two block-level barriers at once (two kernels on different streams
/// that both use block b). Up to 64 ranks.
///   iris::device::barrier(iris::block{}, ctx);
IRIS_DEVICE_FN void barrier(block, const Context& ctx);

/// Every thread of every block of this grid waits until all threads of the calling grid of every
/// rank have arrived. All blocks of the grid must be resident at once (size the grid with
/// cudaOccupancyMaxActiveBlocksPerMultiprocessor, leaving room for other ranks' kernels when
/// ranks share a GPU), or the blocks that are not resident are waited for until the timeout.
/// One grid-wide barrier at a time per rank. Grids may differ in shape between ranks.
///   iris::device::barrier(iris::grid{}, ctx);
IRIS_DEVICE_FN void barrier(grid, const Context& ctx);

}  // namespace iris::device

#include "iris/device/detail/barrier_impl.hpp"
