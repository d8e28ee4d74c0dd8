// Where the calling thread sits in its warp, block and grid. Not public.
#pragma once

#include <cstddef>

#include "iris/device/detail/config.hpp"

namespace iris::device::detail {

IRIS_DEVICE_FN IRIS_FORCEINLINE unsigned linear_thread_index() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

IRIS_DEVICE_FN IRIS_FORCEINLINE unsigned threads_per_block() {
  return blockDim.x * blockDim.y * blockDim.z;
}

IRIS_DEVICE_FN IRIS_FORCEINLINE unsigned lane_index() {
  unsigned lane;
  asm("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
}

/// bar.sync on named barrier `id` for `threads` threads (a multiple of 32).
IRIS_DEVICE_FN IRIS_FORCEINLINE void named_barrier_sync(unsigned id, unsigned threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

/// The cold end of iris::warps<N>::sync() in a group past the eighth: named barriers 8-15 are
/// all taken (no Context here to report through, so it traps where the debugger shows the
/// group index).
__noinline__ IRIS_DEVICE_FN inline void too_many_warp_groups(unsigned group) {
  (void)group;
  __trap();
}

IRIS_DEVICE_FN IRIS_FORCEINLINE std::size_t linear_block_index() {
  return blockIdx.x + std::size_t{gridDim.x} * (blockIdx.y + std::size_t{gridDim.y} * blockIdx.z);
}

IRIS_DEVICE_FN IRIS_FORCEINLINE std::size_t blocks_per_grid() {
  return std::size_t{gridDim.x} * gridDim.y * gridDim.z;
}

}  // namespace iris::device::detail
