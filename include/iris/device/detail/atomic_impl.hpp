// Bodies behind iris/device/atomic.hpp: every atomic goes through atomic_rmw, which maps the
// element type onto a PTX operand type. Not public.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cuda/std/bit>
#include <cuda/std/type_traits>

#include <cstdint>

#include "iris/device/atomic.hpp"
#include "iris/device/debug.hpp"
#include "iris/device/detail/ptx.hpp"

namespace iris::device::detail {

enum class rmw { add, sub, bit_and, bit_or, bit_xor, min, max, exchange };

template <class T>
inline constexpr bool kAtomicInteger =
    cuda::std::is_integral_v<T> && !cuda::std::is_same_v<T, bool> &&
    (sizeof(T) == 4 || sizeof(T) == 8);
template <class T>
inline constexpr bool kAtomicFloat =
    cuda::std::is_same_v<T, float> || cuda::std::is_same_v<T, double>;
template <class T>
inline constexpr bool kAtomicHalf =
    cuda::std::is_same_v<T, __half> || cuda::std::is_same_v<T, __nv_bfloat16> ||
    cuda::std::is_same_v<T, __half2> || cuda::std::is_same_v<T, __nv_bfloat162>;

template <class T>
using unsigned_bits_t = cuda::std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
template <class T>
using signed_bits_t = cuda::std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
/// What an integer T is to PTX: its width and signedness (min/max care about the latter).
template <class T>
using integer_bits_t =
    cuda::std::conditional_t<cuda::std::is_signed_v<T>, signed_bits_t<T>, unsigned_bits_t<T>>;

template <rmw Op, class T>
IRIS_DEVICE_FN IRIS_FORCEINLINE constexpr void check_atomic_type() {
  static_assert(kAtomicInteger<T> || kAtomicFloat<T> || kAtomicHalf<T>,
                "iris: atomics take 32/64-bit integers, float or double (and, for atomic_add "
                "only, __half, __nv_bfloat16, __half2, __nv_bfloat162)");
  static_assert(!kAtomicHalf<T> || Op == rmw::add,
                "iris: __half, __nv_bfloat16 and their pairs support atomic_add only");
  static_assert(
      kAtomicInteger<T> || (Op != rmw::bit_and && Op != rmw::bit_or && Op != rmw::bit_xor),
      "iris: atomic and/or/xor take integers");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  // The bf16 forms of atom/red exist from sm_90 on: say so here rather than let ptxas fail.
  static_assert(!cuda::std::is_same_v<T, __nv_bfloat16> && !cuda::std::is_same_v<T, __nv_bfloat162>,
                "iris: atomic_add on __nv_bfloat16 or __nv_bfloat162 needs sm_90 (Hopper) or "
                "newer, and this file is being compiled for an older GPU: build for sm_90 "
                "(CMAKE_CUDA_ARCHITECTURES=90) or add in float");
#endif
}

template <class Order>
inline constexpr bool kReleases =
    Order::value == cuda::memory_order_release || Order::value == cuda::memory_order_acq_rel;
template <class Order>
inline constexpr bool kAcquires =
    Order::value == cuda::memory_order_acquire || Order::value == cuda::memory_order_acq_rel;

/// The PTX instruction for Op on an operand type PTX has it for (V).
template <rmw Op, bool Fetch, class P, class V>
IRIS_DEVICE_FN IRIS_FORCEINLINE V rmw_instruction(V* p, V v) {
#define IRIS_RMW_CASE(OP)         \
  if constexpr (Op == rmw::OP) {  \
    if constexpr (Fetch) {        \
      return P::fetch_##OP(p, v); \
    } else {                      \
      P::reduce_##OP(p, v);       \
      return V{};                 \
    }                             \
  }
  IRIS_RMW_CASE(add)
  IRIS_RMW_CASE(bit_and)
  IRIS_RMW_CASE(bit_or)
  IRIS_RMW_CASE(bit_xor)
  IRIS_RMW_CASE(min)
  IRIS_RMW_CASE(max)
#undef IRIS_RMW_CASE
  if constexpr (Op == rmw::exchange) return P::exchange(p, v);
}

/// Float min/max: a compare-and-swap loop, ordered by fences around it (a release fence before
/// the first access, an acquire fence after the last), so the order holds whether or not it
/// wrote.
template <rmw Op, class Order, class Scope, class T>
IRIS_DEVICE_FN T float_min_max(T* p, T v) {
  using Bits = unsigned_bits_t<T>;
  using Relaxed = ptx<cuda::memory_order_relaxed, Scope::value>;
  auto* bits = reinterpret_cast<Bits*>(p);
  if constexpr (kReleases<Order>) fence_acq_rel<Scope::value>();
  Bits old = Relaxed::load(bits);
  for (;;) {
    const T current = cuda::std::bit_cast<T>(old);
    if (!(Op == rmw::min ? v < current : current < v)) break;
    const Bits seen = Relaxed::compare_exchange(bits, old, cuda::std::bit_cast<Bits>(v));
    if (seen == old) break;
    old = seen;
  }
  if constexpr (kAcquires<Order>) fence_acq_rel<Scope::value>();
  return cuda::std::bit_cast<T>(old);
}

/// Op on rank `to`'s copy of *ptr. Fetch = false: the non-fetching form (returns T{}).
template <rmw Op, bool Fetch, class Order, class Scope, class T>
IRIS_DEVICE_FN IRIS_FORCEINLINE T atomic_rmw(const Context& ctx, const char* operation, T* ptr,
                                             T value, int to) {
  detail::check_tags<Fetch ? access::read_modify_write : access::store, Order, Scope>();
  check_atomic_type<Op, T>();
  T* target = checked_translate(ctx, operation, ptr, 1, to);
  using P = ptx<Order::value, Scope::value>;
  if constexpr (kAtomicInteger<T>) {
    // min/max compare with T's signedness; everything else is the same on unsigned bits, and
    // subtraction is adding the two's complement.
    using V = cuda::std::conditional_t<Op == rmw::min || Op == rmw::max, integer_bits_t<T>,
                                       unsigned_bits_t<T>>;
    constexpr rmw kOp = Op == rmw::sub ? rmw::add : Op;
    const V operand = Op == rmw::sub ? V(0) - static_cast<V>(value) : static_cast<V>(value);
    return static_cast<T>(rmw_instruction<kOp, Fetch, P>(reinterpret_cast<V*>(target), operand));
  } else if constexpr (kAtomicFloat<T>) {
    if constexpr (Op == rmw::add || Op == rmw::sub) {
      return rmw_instruction<rmw::add, Fetch, P>(target, Op == rmw::sub ? -value : value);
    } else if constexpr (Op == rmw::min || Op == rmw::max) {
      return float_min_max<Op, Order, Scope>(target, value);
    } else {
      using Bits = unsigned_bits_t<T>;
      return cuda::std::bit_cast<T>(rmw_instruction<Op, Fetch, P>(
          reinterpret_cast<Bits*>(target), cuda::std::bit_cast<Bits>(value)));
    }
  } else {
    using Bits = cuda::std::conditional_t<sizeof(T) == 2, unsigned short, std::uint32_t>;
    auto* bits = reinterpret_cast<Bits*>(target);
    const auto operand = bits_as<Bits>(value);
    Bits old{};
    if constexpr (cuda::std::is_same_v<T, __half>) {
      if constexpr (Fetch)
        old = P::fetch_add_f16(bits, operand);
      else
        P::reduce_add_f16(bits, operand);
    } else if constexpr (cuda::std::is_same_v<T, __nv_bfloat16>) {
      if constexpr (Fetch)
        old = P::fetch_add_bf16(bits, operand);
      else
        P::reduce_add_bf16(bits, operand);
    } else if constexpr (cuda::std::is_same_v<T, __half2>) {
      if constexpr (Fetch)
        old = P::fetch_add_f16x2(bits, operand);
      else
        P::reduce_add_f16x2(bits, operand);
    } else {
      if constexpr (Fetch)
        old = P::fetch_add_bf16x2(bits, operand);
      else
        P::reduce_add_bf16x2(bits, operand);
    }
    return bits_as<T>(old);
  }
}

template <class T>
IRIS_DEVICE_FN IRIS_FORCEINLINE constexpr void check_plain_atomic_type() {
  static_assert(kAtomicInteger<T> || kAtomicFloat<T>,
                "iris: atomic_load, atomic_store and atomic_cas take 32/64-bit integers, float "
                "or double");
}

}  // namespace iris::device::detail

namespace iris::device {

#define IRIS_DEFINE_ATOMIC(NAME, OP, FETCH, RESULT)                                           \
  template <class T, class Order, class Scope>                                                \
  IRIS_DEVICE_FN RESULT NAME(const Context& ctx, T* ptr, cuda::std::type_identity_t<T> value, \
                             int to, Order, Scope) {                                          \
    return static_cast<RESULT>(detail::atomic_rmw<detail::rmw::OP, FETCH, Order, Scope>(      \
        ctx, #NAME, ptr, static_cast<T>(value), to));                                         \
  }
IRIS_DEFINE_ATOMIC(atomic_add, add, true, T)
IRIS_DEFINE_ATOMIC(atomic_sub, sub, true, T)
IRIS_DEFINE_ATOMIC(atomic_and, bit_and, true, T)
IRIS_DEFINE_ATOMIC(atomic_or, bit_or, true, T)
IRIS_DEFINE_ATOMIC(atomic_xor, bit_xor, true, T)
IRIS_DEFINE_ATOMIC(atomic_min, min, true, T)
IRIS_DEFINE_ATOMIC(atomic_max, max, true, T)
IRIS_DEFINE_ATOMIC(atomic_exchange, exchange, true, T)
IRIS_DEFINE_ATOMIC(atomic_add_nofetch, add, false, void)
IRIS_DEFINE_ATOMIC(atomic_sub_nofetch, sub, false, void)
IRIS_DEFINE_ATOMIC(atomic_and_nofetch, bit_and, false, void)
IRIS_DEFINE_ATOMIC(atomic_or_nofetch, bit_or, false, void)
IRIS_DEFINE_ATOMIC(atomic_xor_nofetch, bit_xor, false, void)
IRIS_DEFINE_ATOMIC(atomic_min_nofetch, min, false, void)
IRIS_DEFINE_ATOMIC(atomic_max_nofetch, max, false, void)
#undef IRIS_DEFINE_ATOMIC

template <class T, class Order, class Scope>
IRIS_DEVICE_FN T atomic_cas(const Context& ctx, T* ptr, cuda::std::type_identity_t<T> expected,
                            cuda::std::type_identity_t<T> desired, int to, Order, Scope) {
  detail::check_tags<access::read_modify_write, Order, Scope>();
  detail::check_plain_atomic_type<T>();
  using Bits = detail::unsigned_bits_t<T>;
  auto* target = reinterpret_cast<Bits*>(detail::checked_translate(ctx, "atomic_cas", ptr, 1, to));
  return cuda::std::bit_cast<T>(detail::ptx<Order::value, Scope::value>::compare_exchange(
      target, cuda::std::bit_cast<Bits>(static_cast<T>(expected)),
      cuda::std::bit_cast<Bits>(static_cast<T>(desired))));
}

template <class T, class Order, class Scope>
IRIS_DEVICE_FN T atomic_load(const Context& ctx, const T* ptr, int from, Order, Scope) {
  detail::check_tags<access::load, Order, Scope>();
  detail::check_plain_atomic_type<T>();
  using Bits = detail::unsigned_bits_t<T>;
  const auto* source =
      reinterpret_cast<const Bits*>(detail::checked_translate(ctx, "atomic_load", ptr, 1, from));
  return cuda::std::bit_cast<T>(detail::ptx<Order::value, Scope::value>::load(source));
}

template <class T, class Order, class Scope>
IRIS_DEVICE_FN void atomic_store(const Context& ctx, T* ptr, cuda::std::type_identity_t<T> value,
                                 int to, Order, Scope) {
  detail::check_tags<access::store, Order, Scope>();
  detail::check_plain_atomic_type<T>();
  using Bits = detail::unsigned_bits_t<T>;
  auto* target =
      reinterpret_cast<Bits*>(detail::checked_translate(ctx, "atomic_store", ptr, 1, to));
  detail::ptx<Order::value, Scope::value>::store(target,
                                                 cuda::std::bit_cast<Bits>(static_cast<T>(value)));
}

}  // namespace iris::device
