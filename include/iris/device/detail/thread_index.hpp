// Where the calling thread sits in its warp, block and grid. Not public.
#pragma once

#include <cstddef>

#include "iris/device/detail/config.hpp"

namespace iris {

namespace detail {

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

template <unsigned Threads>
IRIS_DEVICE_FN IRIS_FORCEINLINE void named_barrier_sync(unsigned id) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "n"(Threads) : "memory");
}

IRIS_DEVICE_FN IRIS_FORCEINLINE std::size_t linear_block_index() {
  return blockIdx.x + std::size_t{gridDim.x} * (blockIdx.y + std::size_t{gridDim.y} * blockIdx.z);
}

IRIS_DEVICE_FN IRIS_FORCEINLINE std::size_t blocks_per_grid() {
  return std::size_t{gridDim.x} * gridDim.y * gridDim.z;
}

}  // namespace detail

}  // namespace iris
