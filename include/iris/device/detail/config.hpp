// Macros and constants shared by host and device code. Not public.
#pragma once

#include <cstddef>

#if defined(__CUDACC__) || defined(__CUDA_ARCH__)
#define IRIS_HOST_DEVICE __host__ __device__
#define IRIS_DEVICE_FN __device__
#else
#define IRIS_HOST_DEVICE
#define IRIS_DEVICE_FN
#endif

#define IRIS_FORCEINLINE __forceinline__

namespace iris::device::detail {

/// Bytes at the start of every rank's heap that Iris keeps for its own state (barrier flags,
/// epochs). The allocator hands out memory only above this; it is zeroed when the heap is made.
inline constexpr std::size_t kReservedHeapBytes = std::size_t{1} << 20;

}  // namespace iris::device::detail
