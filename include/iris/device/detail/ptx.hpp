// PTX wrappers for strong (ordered, scoped) memory operations. Not public.
//
// ptx<Order, Scope> holds one static function per instruction form, overloaded by the operand
// type. The public layer (atomic.hpp, signal.hpp) checks that the order suits the access before
// it gets here, so a discarded `if constexpr` branch below may spell an invalid combination
// (e.g. "ld.release"); it is never emitted.
#pragma once

#include <cuda/atomic>

#include <cstdint>
#include <cstring>

#include "iris/device/detail/config.hpp"

// Expands STMT(".sem", ".scope", ...) for the enclosing template's Order and Scope.
#define IRIS_PTX_SCOPE_CASES(STMT, SEM, ...)                 \
  if constexpr (Scope == cuda::thread_scope_block) {         \
    STMT(SEM, ".cta", __VA_ARGS__);                          \
  } else if constexpr (Scope == cuda::thread_scope_device) { \
    STMT(SEM, ".gpu", __VA_ARGS__);                          \
  } else {                                                   \
    STMT(SEM, ".sys", __VA_ARGS__);                          \
  }
#define IRIS_PTX_ORDER_SCOPE_CASES(STMT, ...)                 \
  if constexpr (Order == cuda::memory_order_relaxed) {        \
    IRIS_PTX_SCOPE_CASES(STMT, ".relaxed", __VA_ARGS__)       \
  } else if constexpr (Order == cuda::memory_order_acquire) { \
    IRIS_PTX_SCOPE_CASES(STMT, ".acquire", __VA_ARGS__)       \
  } else if constexpr (Order == cuda::memory_order_release) { \
    IRIS_PTX_SCOPE_CASES(STMT, ".release", __VA_ARGS__)       \
  } else {                                                    \
    IRIS_PTX_SCOPE_CASES(STMT, ".acq_rel", __VA_ARGS__)       \
  }

#define IRIS_PTX_LD(SEM, SCOPE, TYPE, C, out, p) \
  asm volatile("ld" SEM SCOPE ".global." TYPE " %0, [%1];" : "=" C(out) : "l"(p) : "memory")
#define IRIS_PTX_ST(SEM, SCOPE, TYPE, C, p, v) \
  asm volatile("st" SEM SCOPE ".global." TYPE " [%0], %1;" ::"l"(p), C(v) : "memory")
#define IRIS_PTX_ATOM(SEM, SCOPE, OP, C, out, p, v)            \
  asm volatile("atom" SEM SCOPE ".global." OP " %0, [%1], %2;" \
               : "=" C(out)                                    \
               : "l"(p), C(v)                                  \
               : "memory")
#define IRIS_PTX_CAS(SEM, SCOPE, OP, C, out, p, expected, desired) \
  asm volatile("atom" SEM SCOPE ".global." OP " %0, [%1], %2, %3;" \
               : "=" C(out)                                        \
               : "l"(p), C(expected), C(desired)                   \
               : "memory")
#define IRIS_PTX_RED(SEM, SCOPE, OP, C, p, v) \
  asm volatile("red" SEM SCOPE ".global." OP " [%0], %1;" ::"l"(p), C(v) : "memory")

// One overload per (function, PTX type): fetching, non-fetching, load, store.
#define IRIS_PTX_FETCH(NAME, OP, T, C)                          \
  IRIS_DEVICE_FN IRIS_FORCEINLINE static T NAME(T* p, T v) {    \
    T out;                                                      \
    IRIS_PTX_ORDER_SCOPE_CASES(IRIS_PTX_ATOM, OP, C, out, p, v) \
    return out;                                                 \
  }
#define IRIS_PTX_REDUCE(NAME, OP, T, C)                         \
  IRIS_DEVICE_FN IRIS_FORCEINLINE static void NAME(T* p, T v) { \
    IRIS_PTX_ORDER_SCOPE_CASES(IRIS_PTX_RED, OP, C, p, v)       \
  }
#define IRIS_PTX_FETCH_AND_REDUCE(OP_NAME, OP, T, C) \
  IRIS_PTX_FETCH(fetch_##OP_NAME, OP, T, C)          \
  IRIS_PTX_REDUCE(reduce_##OP_NAME, OP, T, C)

namespace iris::device::detail {

/// The bits of `from` as a `To` of the same size. Unlike bit_cast it also takes types with
/// user-written copy constructors (__nv_bfloat162); the memcpy compiles to register moves.
template <class To, class From>
IRIS_DEVICE_FN IRIS_FORCEINLINE To bits_as(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "iris: bits_as needs types of one size");
  To to;
  std::memcpy(static_cast<void*>(&to), static_cast<const void*>(&from), sizeof(To));
  return to;
}

template <cuda::memory_order Order, cuda::thread_scope Scope>
struct ptx {
  IRIS_DEVICE_FN IRIS_FORCEINLINE static std::uint32_t load(const std::uint32_t* p) {
    std::uint32_t out;
    IRIS_PTX_ORDER_SCOPE_CASES(IRIS_PTX_LD, "b32", "r", out, p)
    return out;
  }
  IRIS_DEVICE_FN IRIS_FORCEINLINE static std::uint64_t load(const std::uint64_t* p) {
    std::uint64_t out;
    IRIS_PTX_ORDER_SCOPE_CASES(IRIS_PTX_LD, "b64", "l", out, p)
    return out;
  }
  IRIS_DEVICE_FN IRIS_FORCEINLINE static std::uint32_t compare_exchange(std::uint32_t* p,
                                                                        std::uint32_t expected,
                                                                        std::uint32_t desired) {
    std::uint32_t out;
    IRIS_PTX_ORDER_SCOPE_CASES(IRIS_PTX_CAS, "cas.b32", "r", out, p, expected, desired)
    return out;
  }
  IRIS_DEVICE_FN IRIS_FORCEINLINE static std::uint64_t compare_exchange(std::uint64_t* p,
                                                                        std::uint64_t expected,
                                                                        std::uint64_t desired) {
    std::uint64_t out;
    IRIS_PTX_ORDER_SCOPE_CASES(IRIS_PTX_CAS, "cas.b64", "l", out, p, expected, desired)
    return out;
  }

  // The macros below expand to whole member functions, so clang-format cannot lay them out.
  // clang-format off
  IRIS_DEVICE_FN IRIS_FORCEINLINE static void store(std::uint32_t* p, std::uint32_t v) {
    IRIS_PTX_ORDER_SCOPE_CASES(IRIS_PTX_ST, "b32", "r", p, v)
  }
  IRIS_DEVICE_FN IRIS_FORCEINLINE static void store(std::uint64_t* p, std::uint64_t v) {
    IRIS_PTX_ORDER_SCOPE_CASES(IRIS_PTX_ST, "b64", "l", p, v)
  }

  //                        name        PTX operation       operand type    constraint
  IRIS_PTX_FETCH_AND_REDUCE(add,        "add.u32",          std::uint32_t,  "r")
  IRIS_PTX_FETCH_AND_REDUCE(add,        "add.u64",          std::uint64_t,  "l")
  IRIS_PTX_FETCH_AND_REDUCE(add,        "add.f32",          float,          "f")
  IRIS_PTX_FETCH_AND_REDUCE(add,        "add.f64",          double,         "d")
  // 16-bit and packed halves travel as raw bits; the name says the format.
  IRIS_PTX_FETCH_AND_REDUCE(add_f16,    "add.noftz.f16",    unsigned short, "h")
  IRIS_PTX_FETCH_AND_REDUCE(add_bf16,   "add.noftz.bf16",   unsigned short, "h")
  IRIS_PTX_FETCH_AND_REDUCE(add_f16x2,  "add.noftz.f16x2",  std::uint32_t,  "r")
  IRIS_PTX_FETCH_AND_REDUCE(add_bf16x2, "add.noftz.bf16x2", std::uint32_t,  "r")
  IRIS_PTX_FETCH_AND_REDUCE(bit_and,    "and.b32",          std::uint32_t,  "r")
  IRIS_PTX_FETCH_AND_REDUCE(bit_and,    "and.b64",          std::uint64_t,  "l")
  IRIS_PTX_FETCH_AND_REDUCE(bit_or,     "or.b32",           std::uint32_t,  "r")
  IRIS_PTX_FETCH_AND_REDUCE(bit_or,     "or.b64",           std::uint64_t,  "l")
  IRIS_PTX_FETCH_AND_REDUCE(bit_xor,    "xor.b32",          std::uint32_t,  "r")
  IRIS_PTX_FETCH_AND_REDUCE(bit_xor,    "xor.b64",          std::uint64_t,  "l")
  IRIS_PTX_FETCH_AND_REDUCE(min,        "min.u32",          std::uint32_t,  "r")
  IRIS_PTX_FETCH_AND_REDUCE(min,        "min.s32",          std::int32_t,   "r")
  IRIS_PTX_FETCH_AND_REDUCE(min,        "min.u64",          std::uint64_t,  "l")
  IRIS_PTX_FETCH_AND_REDUCE(min,        "min.s64",          std::int64_t,   "l")
  IRIS_PTX_FETCH_AND_REDUCE(max,        "max.u32",          std::uint32_t,  "r")
  IRIS_PTX_FETCH_AND_REDUCE(max,        "max.s32",          std::int32_t,   "r")
  IRIS_PTX_FETCH_AND_REDUCE(max,        "max.u64",          std::uint64_t,  "l")
  IRIS_PTX_FETCH_AND_REDUCE(max,        "max.s64",          std::int64_t,   "l")
  IRIS_PTX_FETCH           (exchange,   "exch.b32",         std::uint32_t,  "r")
  IRIS_PTX_FETCH           (exchange,   "exch.b64",         std::uint64_t,  "l")
  // clang-format on
};

#undef IRIS_PTX_FETCH_AND_REDUCE
#undef IRIS_PTX_REDUCE
#undef IRIS_PTX_FETCH
#undef IRIS_PTX_RED
#undef IRIS_PTX_CAS
#undef IRIS_PTX_ATOM
#undef IRIS_PTX_ST
#undef IRIS_PTX_LD
#undef IRIS_PTX_ORDER_SCOPE_CASES
#undef IRIS_PTX_SCOPE_CASES

/// fence.acq_rel at `Scope`: orders this thread's earlier accesses before its later ones for
/// every thread in the scope (a release pattern with a later strong store, an acquire pattern
/// with an earlier strong load).
template <cuda::thread_scope Scope>
IRIS_DEVICE_FN IRIS_FORCEINLINE void fence_acq_rel() {
  if constexpr (Scope == cuda::thread_scope_block) {
    asm volatile("fence.acq_rel.cta;" ::: "memory");
  } else if constexpr (Scope == cuda::thread_scope_device) {
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
  } else {
    asm volatile("fence.acq_rel.sys;" ::: "memory");
  }
}

/// fence.sc.sys: the strongest fence; every earlier access of this thread is performed for the
/// whole system before any later one.
IRIS_DEVICE_FN IRIS_FORCEINLINE void fence_sc_system() {
  asm volatile("fence.sc.sys;" ::: "memory");
}

/// Nanoseconds of the GPU's global timer (coarse, but the same clock on every SM).
IRIS_DEVICE_FN IRIS_FORCEINLINE std::uint64_t global_timer_ns() {
  std::uint64_t ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}

}  // namespace iris::device::detail
