// Device fills for typed symmetric allocations. Random values come from a counter-based hash
// of (seed, element index), so a fill is reproducible whatever the grid shape or rank.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

#include "detail/fill.hpp"
#include "iris/host/error.hpp"

namespace iris::detail {
namespace {

template <class T>
__host__ __device__ T from_bits(std::uint64_t bits) {
  T value;
  memcpy(&value, &bits, sizeof(T));
  return value;
}

template <class T>
__device__ double to_double(T value) {
  if constexpr (std::is_same_v<T, __half>)
    return static_cast<double>(__half2float(value));
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return static_cast<double>(__bfloat162float(value));
  else
    return static_cast<double>(value);
}

template <class T>
__device__ T from_double(double value) {
  if constexpr (std::is_same_v<T, __half>)
    return __float2half(static_cast<float>(value));
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16(static_cast<float>(value));
  else
    return static_cast<T>(value);
}

template <class T>
inline constexpr bool kIsFloat =
    std::is_floating_point_v<T> || std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// SplitMix64's finaliser: a bijective mix, so distinct counters give distinct outputs.
__device__ std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) with 53 random bits.
__device__ double unit(std::uint64_t seed, std::uint64_t counter) {
  return static_cast<double>(mix(mix(seed) ^ counter) >> 11) * 0x1.0p-53;
}

template <class T>
__device__ T element(const FillRequest& fill, std::uint64_t i) {
  switch (fill.kind) {
    case FillKind::kValue:
      return from_bits<T>(fill.a);
    case FillKind::kArange:
      if constexpr (kIsFloat<T>) {
        return from_double<T>(to_double(from_bits<T>(fill.a)) +
                              static_cast<double>(i) * to_double(from_bits<T>(fill.b)));
      } else {
        // Integer ranges wrap like the type's own arithmetic, in unsigned to stay defined.
        using U = std::make_unsigned_t<T>;
        return static_cast<T>(static_cast<U>(from_bits<T>(fill.a)) +
                              static_cast<U>(i) * static_cast<U>(from_bits<T>(fill.b)));
      }
    case FillKind::kUniform: {
      const double low = to_double(from_bits<T>(fill.a));
      const double high = to_double(from_bits<T>(fill.b));
      const double u = unit(fill.seed, i);
      if constexpr (kIsFloat<T>) {
        return from_double<T>(low + (high - low) * u);
      } else {
        // [low, high): floor keeps the upper end out.
        const double value = low + floor((high - low) * u);
        return static_cast<T>(value < high ? value : low);
      }
    }
    case FillKind::kNormal: {
      if constexpr (kIsFloat<T>) {
        // Box-Muller on two independent streams of the same counter.
        const double u1 = 1.0 - unit(fill.seed, 2 * i);  // (0, 1]: log stays finite
        const double u2 = unit(fill.seed, 2 * i + 1);
        const double z = sqrt(-2.0 * log(u1)) * cospi(2.0 * u2);
        return from_double<T>(to_double(from_bits<T>(fill.a)) +
                              to_double(from_bits<T>(fill.b)) * z);
      } else {
        return T{};
      }
    }
    case FillKind::kNone:
      break;
  }
  return T{};
}

template <class T>
__global__ void fill_kernel(T* data, std::uint64_t rows, std::uint64_t cols,
                            std::uint64_t row_stride, FillRequest fill) {
  const std::uint64_t count = rows * cols;
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < count;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    const std::uint64_t row = i / cols;
    data[row * row_stride + (i - row * cols)] = element<T>(fill, i);
  }
}

template <class T>
void launch_typed(void* data, const Shape& shape, const FillRequest& fill, cudaStream_t stream) {
  const std::uint64_t count = shape.elements();
  if (count == 0) return;
  constexpr unsigned kThreads = 256;
  const std::uint64_t blocks = (count + kThreads - 1) / kThreads;
  const unsigned grid = static_cast<unsigned>(blocks < 65536 ? blocks : 65536);
  fill_kernel<T><<<grid, kThreads, 0, stream>>>(static_cast<T*>(data), shape.rows, shape.cols,
                                                shape.row_stride, fill);
  IRIS_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void launch_fill(void* data, const Shape& shape, const FillRequest& fill, cudaStream_t stream) {
  switch (fill.dtype) {
    case DType::kF32:
      return launch_typed<float>(data, shape, fill, stream);
    case DType::kF64:
      return launch_typed<double>(data, shape, fill, stream);
    case DType::kF16:
      return launch_typed<__half>(data, shape, fill, stream);
    case DType::kBF16:
      return launch_typed<__nv_bfloat16>(data, shape, fill, stream);
    case DType::kI8:
      return launch_typed<std::int8_t>(data, shape, fill, stream);
    case DType::kU8:
      return launch_typed<std::uint8_t>(data, shape, fill, stream);
    case DType::kI16:
      return launch_typed<std::int16_t>(data, shape, fill, stream);
    case DType::kU16:
      return launch_typed<std::uint16_t>(data, shape, fill, stream);
    case DType::kI32:
      return launch_typed<std::int32_t>(data, shape, fill, stream);
    case DType::kU32:
      return launch_typed<std::uint32_t>(data, shape, fill, stream);
    case DType::kI64:
      return launch_typed<std::int64_t>(data, shape, fill, stream);
    case DType::kU64:
      return launch_typed<std::uint64_t>(data, shape, fill, stream);
  }
  throw Error(Errc::kInternal, "launch_fill: unknown element type");
}

}  // namespace iris::detail
