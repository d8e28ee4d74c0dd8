// Template bodies of iris::Context's typed allocations. Not public.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace iris::detail {

/// Element types the fills support.
enum class DType { kF32, kF64, kF16, kBF16, kI8, kU8, kI16, kU16, kI32, kU32, kI64, kU64 };

template <class T>
inline constexpr bool kFillable = false;
template <class T>
inline constexpr DType kDType{};
#define IRIS_DTYPE(type, tag)                   \
  template <>                                   \
  inline constexpr bool kFillable<type> = true; \
  template <>                                   \
  inline constexpr DType kDType<type> = DType::tag;
IRIS_DTYPE(float, kF32)
IRIS_DTYPE(double, kF64)
IRIS_DTYPE(__half, kF16)
IRIS_DTYPE(__nv_bfloat16, kBF16)
IRIS_DTYPE(std::int8_t, kI8)
IRIS_DTYPE(std::uint8_t, kU8)
IRIS_DTYPE(std::int16_t, kI16)
IRIS_DTYPE(std::uint16_t, kU16)
IRIS_DTYPE(std::int32_t, kI32)
IRIS_DTYPE(std::uint32_t, kU32)
IRIS_DTYPE(std::int64_t, kI64)
IRIS_DTYPE(std::uint64_t, kU64)
#undef IRIS_DTYPE

template <class T>
inline constexpr bool kFloating =
    std::is_floating_point_v<T> || std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

enum class FillKind { kNone, kValue, kArange, kUniform, kNormal };

/// A fill request in type-erased form: the two parameters as the element type's bytes.
struct FillRequest {
  FillKind kind = FillKind::kNone;
  DType dtype = DType::kF32;
  std::uint64_t a = 0;  // value / start / low / mean
  std::uint64_t b = 0;  // step / high / stddev
  std::uint64_t seed = 0;
};

template <class T>
std::uint64_t bits_of(T value) {
  std::uint64_t out = 0;
  std::memcpy(&out, &value, sizeof(T));
  return out;
}

/// Allocates `shape` of `element_bytes`-byte elements (collective), fills this rank's copy as
/// `fill` says, and runs the context's barrier when it filled. Returns this rank's pointer.
void* allocate_symmetric(ContextState& state, Shape shape, std::size_t element_bytes,
                         const FillRequest& fill, std::source_location where);

}  // namespace iris::detail

namespace iris {

template <class T>
Buffer<T> Context::empty(Shape shape, std::source_location where) {
  static_assert(std::is_trivially_copyable_v<T>, "symmetric buffers hold trivially copyable types");
  void* data = detail::allocate_symmetric(*state_, shape, sizeof(T), {}, where);
  return Buffer<T>(state_, static_cast<T*>(data), shape);
}

template <class T>
Buffer<T> Context::full(Shape shape, T value, std::source_location where) {
  static_assert(detail::kFillable<T>,
                "iris fills support float, double, __half, __nv_bfloat16 and 8..64-bit integers");
  const detail::FillRequest fill{detail::FillKind::kValue, detail::kDType<T>,
                                 detail::bits_of(value)};
  void* data = detail::allocate_symmetric(*state_, shape, sizeof(T), fill, where);
  return Buffer<T>(state_, static_cast<T*>(data), shape);
}

template <class T>
Buffer<T> Context::zeros(Shape shape, std::source_location where) {
  return full<T>(shape, T(0), where);
}

template <class T>
Buffer<T> Context::ones(Shape shape, std::source_location where) {
  return full<T>(shape, T(1), where);
}

template <class T>
Buffer<T> Context::arange(Shape shape, T start, T step, std::source_location where) {
  static_assert(detail::kFillable<T>,
                "iris fills support float, double, __half, __nv_bfloat16 and 8..64-bit integers");
  const detail::FillRequest fill{detail::FillKind::kArange, detail::kDType<T>,
                                 detail::bits_of(start), detail::bits_of(step)};
  void* data = detail::allocate_symmetric(*state_, shape, sizeof(T), fill, where);
  return Buffer<T>(state_, static_cast<T*>(data), shape);
}

template <class T>
Buffer<T> Context::uniform(Shape shape, T low, T high, std::uint64_t seed,
                           std::source_location where) {
  static_assert(detail::kFillable<T>,
                "iris fills support float, double, __half, __nv_bfloat16 and 8..64-bit integers");
  const detail::FillRequest fill{detail::FillKind::kUniform, detail::kDType<T>,
                                 detail::bits_of(low), detail::bits_of(high), seed};
  void* data = detail::allocate_symmetric(*state_, shape, sizeof(T), fill, where);
  return Buffer<T>(state_, static_cast<T*>(data), shape);
}

template <class T>
Buffer<T> Context::normal(Shape shape, T mean, T stddev, std::uint64_t seed,
                          std::source_location where) {
  static_assert(detail::kFloating<T>, "normal() fills floating-point types only");
  const detail::FillRequest fill{detail::FillKind::kNormal, detail::kDType<T>,
                                 detail::bits_of(mean), detail::bits_of(stddev), seed};
  void* data = detail::allocate_symmetric(*state_, shape, sizeof(T), fill, where);
  return Buffer<T>(state_, static_cast<T*>(data), shape);
}

}  // namespace iris
