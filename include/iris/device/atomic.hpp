// Atomics on any rank's copy of a symmetric object.
//
// clang-format off
//   auto ticket = iris::device::atomic_add(ctx, counter, 1, 0);           // fetch, acq_rel.sys
//   iris::device::atomic_add_nofetch(ctx, hits, 1, peer, iris::relaxed);  // no result
//   auto seen = iris::device::atomic_cas(ctx, lock, 0, 1, 0, iris::acquire);
// clang-format on
//
// `ptr` is this rank's copy; the operation acts on rank `to`'s copy. The order and scope come
// last, as tags (iris/device/order.hpp). Defaults: read-modify-writes are iris::acq_rel, loads
// iris::acquire, stores and non-fetching operations iris::release, all at iris::sys, which is
// right for anything another rank also touches. Narrower scopes (iris::gpu, iris::cta) are only
// for objects no other rank uses concurrently.
//
// Types: 32- and 64-bit integers (signed or unsigned), float and double for arithmetic, min/max,
// exchange and compare-exchange; and/or/xor for integers; atomic_add (fetching or not) also for
// __half, __nv_bfloat16 and the packed pairs __half2, __nv_bfloat162 (each half added
// separately). Float min/max are a compare-and-swap loop (the hardware has none); a NaN already
// stored stays. Anything else fails to compile with the list above.
//
// Fetching forms return the value before the operation. Non-fetching forms (`_nofetch`) compile
// to a reduction (RED): nothing comes back, so they cannot acquire.
#pragma once

#include <cuda/std/type_traits>

#include "iris/device/context.hpp"
#include "iris/device/detail/config.hpp"
#include "iris/device/order.hpp"

namespace iris::device {

/// *ptr += value on rank `to`; returns the old value.
template <class T, class Order = acq_rel_t, class Scope = sys_t>
IRIS_DEVICE_FN T atomic_add(const Context& ctx, T* ptr, cuda::std::type_identity_t<T> value, int to,
                            Order = {}, Scope = {});

/// *ptr -= value on rank `to`; returns the old value.
template <class T, class Order = acq_rel_t, class Scope = sys_t>
IRIS_DEVICE_FN T atomic_sub(const Context& ctx, T* ptr, cuda::std::type_identity_t<T> value, int to,
                            Order = {}, Scope = {});

/// *ptr &= value on rank `to` (integers); returns the old value.
template <class T, class Order = acq_rel_t, class Scope = sys_t>
IRIS_DEVICE_FN T atomic_and(const Context& ctx, T* ptr, cuda::std::type_identity_t<T> value, int to,
                            Order = {}, Scope = {});

/// *ptr |= value on rank `to` (integers); returns the old value.
template <class T, class Order = acq_rel_t, class Scope = sys_t>
IRIS_DEVICE_FN T atomic_or(const Context& ctx, T* ptr, cuda::std::type_identity_t<T> value, int to,
                           Order = {}, Scope = {});

/// *ptr ^= value on rank `to` (integers); returns the old value.
template <class T, class Order = acq_rel_t, class Scope = sys_t>
IRIS_DEVICE_FN T atomic_xor(const Context& ctx, T* ptr, cuda::std::type_identity_t<T> value, int to,
                            Order = {}, Scope = {});

/// *ptr = min(*ptr, value) on rank `to`; returns the old value.
template <class T, class Order = acq_rel_t, class Scope = sys_t>
IRIS_DEVICE_FN T atomic_min(const Context& ctx, T* ptr, cuda::std::type_identity_t<T> value, int to,
                            Order = {}, Scope = {});

/// *ptr = max(*ptr, value) on rank `to`; returns the old value.
template <class T, class Order = acq_rel_t, class Scope = sys_t>
IRIS_DEVICE_FN T atomic_max(const Context& ctx, T* ptr, cuda::std::type_identity_t<T> value, int to,
                            Order = {}, Scope = {});

/// *ptr = value on rank `to`; returns the old value.
template <class T, class Order = acq_rel_t, class Scope = sys_t>
IRIS_DEVICE_FN T atomic_exchange(const Context& ctx, T* ptr, cuda::std::type_identity_t<T> value,
                                 int to, Order = {}, Scope = {});

/// If *ptr == expected on rank `to` (bitwise), *ptr = desired. Returns the old value either way:
/// it succeeded when the result equals `expected`. The order applies whether or not it wrote.
///   while (iris::device::atomic_cas(ctx, lock, 0, 1, 0, iris::acquire) != 0) {}
template <class T, class Order = acq_rel_t, class Scope = sys_t>
IRIS_DEVICE_FN T atomic_cas(const Context& ctx, T* ptr, cuda::std::type_identity_t<T> expected,
                            cuda::std::type_identity_t<T> desired, int to, Order = {}, Scope = {});

// Non-fetching forms: the same effects, no result; iris::release (default) or iris::relaxed.

template <class T, class Order = release_t, class Scope = sys_t>
IRIS_DEVICE_FN void atomic_add_nofetch(const Context& ctx, T* ptr,
                                       cuda::std::type_identity_t<T> value, int to, Order = {},
                                       Scope = {});
template <class T, class Order = release_t, class Scope = sys_t>
IRIS_DEVICE_FN void atomic_sub_nofetch(const Context& ctx, T* ptr,
                                       cuda::std::type_identity_t<T> value, int to, Order = {},
                                       Scope = {});
template <class T, class Order = release_t, class Scope = sys_t>
IRIS_DEVICE_FN void atomic_and_nofetch(const Context& ctx, T* ptr,
                                       cuda::std::type_identity_t<T> value, int to, Order = {},
                                       Scope = {});
template <class T, class Order = release_t, class Scope = sys_t>
IRIS_DEVICE_FN void atomic_or_nofetch(const Context& ctx, T* ptr,
                                      cuda::std::type_identity_t<T> value, int to, Order = {},
                                      Scope = {});
template <class T, class Order = release_t, class Scope = sys_t>
IRIS_DEVICE_FN void atomic_xor_nofetch(const Context& ctx, T* ptr,
                                       cuda::std::type_identity_t<T> value, int to, Order = {},
                                       Scope = {});
template <class T, class Order = release_t, class Scope = sys_t>
IRIS_DEVICE_FN void atomic_min_nofetch(const Context& ctx, T* ptr,
                                       cuda::std::type_identity_t<T> value, int to, Order = {},
                                       Scope = {});
template <class T, class Order = release_t, class Scope = sys_t>
IRIS_DEVICE_FN void atomic_max_nofetch(const Context& ctx, T* ptr,
                                       cuda::std::type_identity_t<T> value, int to, Order = {},
                                       Scope = {});

/// Rank `from`'s copy of *ptr, read atomically; iris::acquire (default) or iris::relaxed.
///   auto v = iris::device::atomic_load(ctx, counter, 0);
template <class T, class Order = acquire_t, class Scope = sys_t>
IRIS_DEVICE_FN T atomic_load(const Context& ctx, const T* ptr, int from, Order = {}, Scope = {});

/// Writes `value` to rank `to`'s copy of *ptr atomically; iris::release (default) or
/// iris::relaxed.
///   iris::device::atomic_store(ctx, slot, v, peer);
template <class T, class Order = release_t, class Scope = sys_t>
IRIS_DEVICE_FN void atomic_store(const Context& ctx, T* ptr, cuda::std::type_identity_t<T> value,
                                 int to, Order = {}, Scope = {});

}  // namespace iris::device

#include "iris/device/detail/atomic_impl.hpp"
