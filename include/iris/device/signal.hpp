// Signals, waits and fences: how ranks tell each other that data is ready.
//
//   // producer (rank 0): data first, then the flag, in one call
//   iris::device::put(iris::block{}, ctx, buf, src, n, 1, iris::signal_add{flag, 1});
//   // consumer (rank 1): returns once its copy of the flag reaches 1; then buf is readable
//   iris::device::wait_until(ctx, flag, iris::cmp::ge, 1);
//
// A flag is a 32- or 64-bit integer in the symmetric heap. Flags are counters or epochs that
// only grow, so nothing has to reset them between rounds: wait for ge the round number.
// Every wait is bounded by ctx.wait_timeout_ns() (IRIS_WAIT_TIMEOUT, 60 s by default; 0 waits
// forever): when it runs out, the rank's mailbox gets "rank 1: wait_until(heap offset 0x100040
// on rank 1, ge 5) timed out after 60.0 s, observed 3 (block 0, thread 0)", the kernel traps, and
// the host throws that as iris::Error(kDeviceTimeout). A wait never hangs silently.
#pragma once

#include <cuda/std/type_traits>

#include "iris/device/cmp.hpp"
#include "iris/device/context.hpp"
#include "iris/device/coop.hpp"
#include "iris/device/detail/config.hpp"
#include "iris/device/order.hpp"

namespace iris {

/// Completion action for put/copy: once the data is visible on the destination rank, set its
/// copy of `flag` (a pointer into this rank's heap) to `value`, with release at system scope.
///   iris::device::put(iris::warp{}, ctx, dst, src, n, peer, iris::signal_set{flag, round});
template <class T>
struct signal_set {
  T* flag;
  T value;
  /// Any value convertible to the flag's type: `signal_set{flag, round}` with an int round.
  template <class V>
  IRIS_HOST_DEVICE constexpr signal_set(T* flag_, V value_)
      : flag(flag_), value(static_cast<T>(value_)) {}
};
template <class T, class V>
signal_set(T*, V) -> signal_set<T>;

/// Completion action for put/copy: once the data is visible on the destination rank, add `value`
/// to its copy of `flag`, with release at system scope.
///   iris::device::put(iris::block{}, ctx, dst, src, n, peer, iris::signal_add{flag, 1});
template <class T>
struct signal_add {
  T* flag;
  T value;
  /// Any value convertible to the flag's type: `signal_add{flag, 1}` for a std::uint64_t flag.
  template <class V>
  IRIS_HOST_DEVICE constexpr signal_add(T* flag_, V value_)
      : flag(flag_), value(static_cast<T>(value_)) {}
};
template <class T, class V>
signal_add(T*, V) -> signal_add<T>;

}  // namespace iris

namespace iris::device {

/// Sets rank `to`'s copy of `*flag` to `value`. With iris::release (the default) every earlier
/// write of this thread, to any rank, is visible to whoever acquires the new value.
///   iris::device::signal_set(ctx, ready, round, peer);
template <class T, class Order = release_t, class Scope = sys_t>
IRIS_DEVICE_FN void signal_set(const Context& ctx, T* flag, cuda::std::type_identity_t<T> value,
                               int to, Order = {}, Scope = {});

/// Adds `value` to rank `to`'s copy of `*flag` (atomically; no result). Ordering as signal_set.
///   iris::device::signal_add(ctx, arrivals, 1, 0);
template <class T, class Order = release_t, class Scope = sys_t>
IRIS_DEVICE_FN void signal_add(const Context& ctx, T* flag, cuda::std::type_identity_t<T> value,
                               int to, Order = {}, Scope = {});

/// Spins on this rank's `*flag` until `*flag cmp value` holds and returns the value that
/// satisfied it. With iris::acquire (the default) everything the signalling thread wrote before
/// its release is visible to this thread afterwards. Bounded: see the top of this file.
///   iris::device::wait_until(ctx, flag, iris::cmp::ge, round);
template <class T, class Order = acquire_t, class Scope = sys_t>
IRIS_DEVICE_FN T wait_until(const Context& ctx, const T* flag, cmp c,
                            cuda::std::type_identity_t<T> value, Order = {}, Scope = {});

/// The group waits: its leader spins as above, then the group syncs, so every member may read
/// what the flag guards. All members must call.
///   iris::device::wait_until(iris::block{}, ctx, flag, iris::cmp::ge, round);
template <synchronizable_group G, class T, class Order = acquire_t, class Scope = sys_t>
IRIS_DEVICE_FN void wait_until(G group, const Context& ctx, const T* flag, cmp c,
                               cuda::std::type_identity_t<T> value, Order = {}, Scope = {});

/// Orders this thread's memory accesses before the fence before those after it, for every thread
/// in `scope` (fence.acq_rel). Followed by a relaxed store it releases; preceded by a relaxed
/// load it acquires.
///   iris::device::fence();             // system scope
template <class Scope = sys_t>
IRIS_DEVICE_FN void fence(Scope = {});

/// Everything this thread stored before, to any rank, is performed for the whole system before
/// anything it does after (fence.sc.sys): a relaxed flag store after quiet() publishes the data.
/// Per thread: in a group, every member that stored calls it (or use a completion action).
///   iris::device::quiet();
IRIS_DEVICE_FN inline void quiet();

}  // namespace iris::device

#include "iris/device/detail/signal_impl.hpp"
