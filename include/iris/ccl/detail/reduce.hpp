// Element arithmetic of the reducing collectives: accumulator types, conversions, and the
// reduction operators, chosen at run time (one kernel per element type, not per operator).
// Not public.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

#include "iris/ccl/types.hpp"
#include "iris/device/detail/config.hpp"

namespace iris::ccl::detail {

/// Elements of T in one 16-byte vector (the unit of the vectorized loops).
template <class T>
inline constexpr std::size_t kVector = 16 / sizeof(T);

IRIS_HOST_DEVICE IRIS_FORCEINLINE bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

/// fp32 for the floating types (half and bfloat16 included), 64 bits for the integers.
template <class T>
struct accumulator {
  using type = std::int64_t;
};
template <>
struct accumulator<float> {
  using type = float;
};
template <>
struct accumulator<__half> {
  using type = float;
};
template <>
struct accumulator<__nv_bfloat16> {
  using type = float;
};
template <class T>
using acc_t = typename accumulator<T>::type;

template <class T>
IRIS_HOST_DEVICE IRIS_FORCEINLINE acc_t<T> widen(T v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(v);
  } else {
    return static_cast<acc_t<T>>(v);
  }
}

template <class T>
IRIS_HOST_DEVICE IRIS_FORCEINLINE T narrow(acc_t<T> v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(v);
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<std::uint64_t>(v));  // wraps as the element type does
  } else {
    return static_cast<T>(v);
  }
}

/// a op b. Integer sums and products wrap (computed unsigned); avg sums here and divides in
/// finish().
template <class A>
IRIS_HOST_DEVICE IRIS_FORCEINLINE A combine(ReduceOp op, A a, A b) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      if constexpr (std::is_integral_v<A>) {
        return static_cast<A>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
      } else {
        return a + b;
      }
    case ReduceOp::kProd:
      if constexpr (std::is_integral_v<A>) {
        return static_cast<A>(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b));
      } else {
        return a * b;
      }
    case ReduceOp::kMin:
      return b < a ? b : a;
    case ReduceOp::kMax:
      return a < b ? b : a;
  }
  return a;
}

/// The last step: avg divides by the number of contributions.
template <class A>
IRIS_HOST_DEVICE IRIS_FORCEINLINE A finish(ReduceOp op, A a, int contributions) {
  if (op == ReduceOp::kAvg) return a / static_cast<A>(contributions);
  return a;
}

/// Reduces `n` values in order 0 .. n-1 with `value(k)`: team order, the fixed order that makes
/// every algorithm's result (but the ring reduce_scatter's, ring.hpp) the same bits on every
/// rank and every run.
template <class T, class Value>
IRIS_HOST_DEVICE IRIS_FORCEINLINE T reduce_in_order(ReduceOp op, int n, Value&& value) {
  acc_t<T> acc = widen<T>(value(0));
  for (int k = 1; k < n; ++k) acc = combine(op, acc, widen<T>(value(k)));
  return narrow<T>(finish(op, acc, n));
}

}  // namespace iris::ccl::detail
