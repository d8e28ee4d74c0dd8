// Signals, waits and fences: how ranks tell each other that data is ready.
//
//   // producer (rank 0): data first, then the flag, in one call
//   iris::device::put(iris::block{}, ctx, buf, src, n, 1, iris::device::signal_add(flag, 1));
//   // consumer (rank 1): returns once its copy of the flag reaches 1; then buf is readable
//   iris::device::wait_until(ctx, flag, iris::cmp::ge, 1);
//
// A flag is a 32- or 64-bit integer in the symmetric heap. Flags are counters or epochs that
// only grow, so nothing has to reset them between rounds: wait for ge the round number.
// Every wait is bounded by ctx.wait_timeout_ns() (IRIS_WAIT_TIMEOUT, 60 s by default; 0 waits
// forever): when it runs out, the rank's mailbox gets "rank 1: wait_until(heap offset 0x100040
// on rank 1, ge 5) timed out after 60.0 s, observed 3 (block 0, thread 0)", the kernel traps, and
// the host throws that as iris::Error(kDeviceTimeout). A wait never hangs silently.
//
// signal_set and signal_add have two forms: with (ctx, flag, value, to) they raise the flag now;
// with (flag, value) they only describe it, as the completion action of put/copy or the action
// of a group signal: one name per operation, whether it runs now or after the data.
//
// ---- How plain stores are published (the rule every part of the API follows) ----------------
// Data moved by put/get/copy/store, and stores through ctx.translate'd pointers, are plain (weak)
// stores. They become visible to a thread on another rank that acquires a flag at system scope
// when, after the stores:
//   (a) the storing thread itself releases the flag at system scope (signal_set/add with
//       iris::release, the default); or
//   (b) the group that stored syncs (bar.sync, a named barrier, __syncwarp, or a Cooperative
//       Groups sync()), and then ANY one member releases the flag at system scope. This is what
//       completion actions and iris::device::signal(group, ...) do; no per-thread fence is needed.
// Why (b) holds, from the PTX ISA memory consistency model: bar.sync / barrier.sync (what
// __syncthreads() and named barriers compile to) are morally strong at CTA scope, and the
// barrier operation of one participating thread synchronizes with the one that completes the
// phase in every other; so a member's weak store precedes (program order) its barrier arrival,
// which synchronizes with the leader's barrier, which precedes (program order) the leader's
// st.release.sys: the store precedes the release in *base causality order*, which is transitive
// and does not depend on the scope of the barrier (for __syncwarp, bar.warp.sync's guarantee of
// memory ordering among the participating threads plays the barrier's part). A release is
// cumulative: the acquiring thread (ld.acquire.sys that reads the released value; the two are
// morally strong, both being at system scope) is ordered after everything that precedes the
// release in causality order, so it observes every member's store. The receiving side mirrors
// it: one member acquires, then its group syncs (wait_until(group, ...)), and every member may
// read. quiet() (fence.sc.sys) in every storing thread is therefore
// not needed before a signal; it is for a thread that publishes its own stores with a *relaxed*
// signal, or wants its stores performed before a later, unrelated access.
// What is NOT enough: a signal without the group's sync (other members' stores may still be in
// flight), or a relaxed signal without a fence (nothing orders the data before the flag).
// tests/mp/publish_test.cu checks (a) and (b) across ranks, many rounds, every word of the data.
#pragma once

#include <cuda/std/type_traits>

#include "iris/device/cmp.hpp"
#include "iris/device/context.hpp"
#include "iris/device/coop.hpp"
#include "iris/device/detail/config.hpp"
#include "iris/device/order.hpp"
#include "iris/device/team.hpp"

namespace iris {

/// put/copy without a completion action: the default last argument.
struct no_signal {};

/// What a signal does to its flag.
enum class signal_op { set, add };

/// A signal described, not yet raised: the completion action of put/copy, or the action of a
/// group signal. Made by iris::device::signal_set(flag, value) and signal_add(flag, value).
/// `flag` is this rank's copy; the action names a rank when it runs.
template <class T, signal_op Op>
struct signal_action {
  T* flag;
  T value;
};

}  // namespace iris

namespace iris::device {

/// The action "set the flag to `value`" (any value convertible to the flag's type), run later by
/// put/copy or signal(group, ...), with release at system scope.
///   iris::device::put(iris::warp{}, ctx, dst, src, n, peer, iris::device::signal_set(flag,
///   round));
template <class T, class V>
[[nodiscard]] IRIS_HOST_DEVICE constexpr signal_action<T, signal_op::set> signal_set(T* flag,
                                                                                     V value) {
  return {flag, static_cast<T>(value)};
}

/// The action "add `value` to the flag", run later as signal_set's.
///   iris::device::put(iris::block{}, ctx, dst, src, n, peer, iris::device::signal_add(flag, 1));
template <class T, class V>
[[nodiscard]] IRIS_HOST_DEVICE constexpr signal_action<T, signal_op::add> signal_add(T* flag,
                                                                                     V value) {
  return {flag, static_cast<T>(value)};
}

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

/// The group waits: one thread of each warp spins as above and hands the value to its warp, then
/// the group syncs, so every member may read what the flag guards. Returns the value the
/// member's warp saw (it satisfies the condition; warps of a larger group may see different
/// satisfying values of a growing flag). All members must call.
///   auto seen = iris::device::wait_until(iris::block{}, ctx, flag, iris::cmp::ge, round);
template <synchronizable_group G, class T, class Order = acquire_t, class Scope = sys_t>
IRIS_DEVICE_FN T wait_until(G group, const Context& ctx, const T* flag, cmp c,
                            cuda::std::type_identity_t<T> value, Order = {}, Scope = {});

/// The group raises a flag without data: the group syncs, then its leader runs `action` on rank
/// `to` with release at system scope. Every member's earlier stores, to any rank (plain stores
/// through ctx.translate'd pointers included), are visible to whoever acquires the new value:
/// rule (b) at the top of this file. A GEMM epilogue that stored its tile with plain stores:
///   iris::device::signal(iris::warps<4>{}, ctx, iris::device::signal_add(tile_ready, 1), peer);
template <synchronizable_group G, class T, signal_op Op>
IRIS_DEVICE_FN void signal(G group, const Context& ctx, signal_action<T, Op> action, int to);

/// The same for every rank of team `t` (this one included when it is a member): the group
/// syncs, then member i of the group raises the flag on team members i, i + n, ... (n threads in
/// the group), each with release at system scope.
///   iris::device::signal(iris::block{}, ctx, iris::device::signal_add(done, 1),
///                        iris::team::world(ctx.world_size()));
template <synchronizable_group G, class T, signal_op Op>
IRIS_DEVICE_FN void signal(G group, const Context& ctx, signal_action<T, Op> action, const team& t);

/// Orders this thread's memory accesses before the fence before those after it, for every thread
/// in `scope` (fence.acq_rel). Followed by a relaxed store it releases; preceded by a relaxed
/// load it acquires.
///   iris::device::fence();             // system scope
template <class Scope = sys_t>
IRIS_DEVICE_FN void fence(Scope = {});

/// Everything this thread stored before, to any rank, is performed for the whole system before
/// anything it does after (fence.sc.sys): a relaxed flag store after quiet() publishes this
/// thread's data. Not needed before a releasing signal, nor per member before a group signal
/// (see the rule at the top of this file).
///   iris::device::quiet();
IRIS_DEVICE_FN inline void quiet();

}  // namespace iris::device

#include "iris/device/detail/signal_impl.hpp"
