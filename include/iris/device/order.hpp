// Memory orders and scopes, as tag values: `iris::acquire`, `iris::sys`, ...
//
//   auto old = iris::device::atomic_add(ctx, counter, 1, peer, iris::relaxed, iris::sys);
//
// Orders (what an operation orders around itself, as cuda::memory_order):
//   iris::relaxed   atomicity only, no ordering
//   iris::acquire   later reads and writes of this thread stay after it (reads only)
//   iris::release   earlier reads and writes of this thread stay before it (writes only)
//   iris::acq_rel   both (read-modify-writes only)
// Scopes (which threads the ordering is promised to, as cuda::thread_scope):
//   iris::cta       threads of the same block
//   iris::gpu       threads of the same process on the same GPU
//   iris::sys       every thread of every process and GPU, and the host
//
// Anything another rank observes needs iris::sys: ranks are other processes, usually on other
// GPUs, and a gpu-scope release does not order anything for them. The defaults are therefore
// iris::sys everywhere; narrower scopes are for objects only this rank's threads touch.
// A combination that means nothing (an acquiring store, a relaxed fence, ...) fails to compile
// with a message saying what to use instead.
#pragma once

#include <cuda/atomic>

#include "iris/device/detail/config.hpp"

namespace iris {

template <cuda::memory_order Order>
struct memory_order_tag {
  static constexpr cuda::memory_order value = Order;
};

using relaxed_t = memory_order_tag<cuda::memory_order_relaxed>;
using acquire_t = memory_order_tag<cuda::memory_order_acquire>;
using release_t = memory_order_tag<cuda::memory_order_release>;
using acq_rel_t = memory_order_tag<cuda::memory_order_acq_rel>;

inline constexpr relaxed_t relaxed{};
inline constexpr acquire_t acquire{};
inline constexpr release_t release{};
inline constexpr acq_rel_t acq_rel{};

template <cuda::thread_scope Scope>
struct thread_scope_tag {
  static constexpr cuda::thread_scope value = Scope;
};

using cta_t = thread_scope_tag<cuda::thread_scope_block>;
using gpu_t = thread_scope_tag<cuda::thread_scope_device>;
using sys_t = thread_scope_tag<cuda::thread_scope_system>;

inline constexpr cta_t cta{};
inline constexpr gpu_t gpu{};
inline constexpr sys_t sys{};

namespace device::detail {
template <class T>
inline constexpr bool kIsOrderTag = false;
template <cuda::memory_order Order>
inline constexpr bool kIsOrderTag<memory_order_tag<Order>> =
    Order == cuda::memory_order_relaxed || Order == cuda::memory_order_acquire ||
    Order == cuda::memory_order_release || Order == cuda::memory_order_acq_rel;
template <class T>
inline constexpr bool kIsScopeTag = false;
template <cuda::thread_scope Scope>
inline constexpr bool kIsScopeTag<thread_scope_tag<Scope>> =
    Scope == cuda::thread_scope_block || Scope == cuda::thread_scope_device ||
    Scope == cuda::thread_scope_system;
}  // namespace device::detail

/// An order tag: iris::relaxed, iris::acquire, iris::release or iris::acq_rel.
template <class T>
concept memory_order_like = device::detail::kIsOrderTag<T>;
/// A scope tag: iris::cta, iris::gpu or iris::sys.
template <class T>
concept thread_scope_like = device::detail::kIsScopeTag<T>;

/// What an order tag is given to; decides which orders make sense.
enum class access {
  load,               ///< reads only: relaxed or acquire
  store,              ///< writes only (stores, non-fetching atomics, signals): relaxed or release
  read_modify_write,  ///< fetching atomics: any order
};

/// True when `Order` means something for an access of kind `Kind`.
template <class Order, access Kind>
inline constexpr bool order_fits =
    Kind == access::load
        ? Order::value == cuda::memory_order_relaxed || Order::value == cuda::memory_order_acquire
    : Kind == access::store
        ? Order::value == cuda::memory_order_relaxed || Order::value == cuda::memory_order_release
        : true;

namespace device::detail {
/// Compile-time check of a call's tags, with messages that say what to write instead.
template <access Kind, class Order, class Scope>
IRIS_HOST_DEVICE constexpr void check_tags() {
  static_assert(memory_order_like<Order>,
                "iris: the order argument must be iris::relaxed, iris::acquire, iris::release or "
                "iris::acq_rel (and comes before the scope)");
  static_assert(thread_scope_like<Scope>,
                "iris: the scope argument must be iris::cta, iris::gpu or iris::sys");
  if constexpr (memory_order_like<Order>) {
    static_assert(Kind != access::load || order_fits<Order, access::load>,
                  "iris: a load writes nothing, so it cannot release: use iris::acquire or "
                  "iris::relaxed");
    static_assert(Kind != access::store || order_fits<Order, access::store>,
                  "iris: a store (or a non-fetching atomic, or a signal) reads nothing, so it "
                  "cannot acquire: use iris::release or iris::relaxed, or the fetching atomic");
  }
}
}  // namespace device::detail

}  // namespace iris
