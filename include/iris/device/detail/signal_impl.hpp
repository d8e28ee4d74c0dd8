// Bodies behind iris/device/signal.hpp, and the completion actions of put/copy. Not public.
#pragma once

#include "iris/device/debug.hpp"
#include "iris/device/detail/ptx.hpp"
#include "iris/device/detail/wait.hpp"
#include "iris/device/signal.hpp"

namespace iris::device {

namespace detail {
template <class T>
IRIS_DEVICE_FN IRIS_FORCEINLINE constexpr void check_flag_type() {
  static_assert(flag_value<T>, "iris: flags are 32- or 64-bit integers (e.g. std::uint64_t)");
}
}  // namespace detail

template <class T, class Order, class Scope>
IRIS_DEVICE_FN void signal_set(const Context& ctx, T* flag, cuda::std::type_identity_t<T> value,
                               int to, Order, Scope) {
  detail::check_flag_type<T>();
  iris::detail::check_tags<access::store, Order, Scope>();
  using Bits = detail::flag_bits_t<T>;
  auto* target = detail::checked_translate(ctx, "signal_set", flag, 1, to);
  detail::ptx<Order::value, Scope::value>::store(reinterpret_cast<Bits*>(target),
                                                 static_cast<Bits>(value));
}

template <class T, class Order, class Scope>
IRIS_DEVICE_FN void signal_add(const Context& ctx, T* flag, cuda::std::type_identity_t<T> value,
                               int to, Order, Scope) {
  detail::check_flag_type<T>();
  iris::detail::check_tags<access::store, Order, Scope>();
  using Bits = detail::flag_bits_t<T>;
  auto* target = detail::checked_translate(ctx, "signal_add", flag, 1, to);
  detail::ptx<Order::value, Scope::value>::reduce_add(reinterpret_cast<Bits*>(target),
                                                      static_cast<Bits>(value));
}

template <class T, class Order, class Scope>
IRIS_DEVICE_FN T wait_until(const Context& ctx, const T* flag, cmp c,
                            cuda::std::type_identity_t<T> value, Order, Scope) {
  detail::check_flag_type<T>();
  iris::detail::check_tags<access::load, Order, Scope>();
  check_access(ctx, "wait_until", flag, sizeof(T), ctx.rank());
  return detail::wait_for<Order::value, Scope::value>(ctx, "wait_until", flag, ctx.rank(), c,
                                                      static_cast<T>(value));
}

template <synchronizable_group G, class T, class Order, class Scope>
IRIS_DEVICE_FN void wait_until(G group, const Context& ctx, const T* flag, cmp c,
                               cuda::std::type_identity_t<T> value, Order order, Scope scope) {
  if (group.rank() == 0) wait_until(ctx, flag, c, value, order, scope);
  group.sync();
}

template <class Scope>
IRIS_DEVICE_FN void fence(Scope) {
  static_assert(thread_scope_like<Scope>, "iris: fence takes iris::cta, iris::gpu or iris::sys");
  detail::fence_acq_rel<Scope::value>();
}

IRIS_DEVICE_FN inline void quiet() {
  detail::fence_sc_system();
}

namespace detail {

/// put/copy without a completion action.
struct no_signal {};

template <class T>
IRIS_DEVICE_FN IRIS_FORCEINLINE void raise(const Context& ctx, const iris::signal_set<T>& action,
                                           int to) {
  device::signal_set(ctx, action.flag, action.value, to);
}

template <class T>
IRIS_DEVICE_FN IRIS_FORCEINLINE void raise(const Context& ctx, const iris::signal_add<T>& action,
                                           int to) {
  device::signal_add(ctx, action.flag, action.value, to);
}

/// Runs a put/copy's completion action: every member's stores are done (sync), then the leader
/// raises the flag on rank `to` with release at system scope, which makes the whole group's
/// data visible there first.
template <class G, class Action>
IRIS_DEVICE_FN IRIS_FORCEINLINE void complete(G group, const Context& ctx, const Action& action,
                                              int to) {
  if constexpr (!cuda::std::is_same_v<Action, no_signal>) {
    static_assert(synchronizable_group<G>,
                  "iris: a completion action needs a group that can sync (thread, warp, "
                  "warps<N>, block); for the whole grid, raise the flag after "
                  "barrier(iris::grid{}, ctx)");
    group.sync();
    if (group.rank() == 0) raise(ctx, action, to);
  }
}

template <class A>
inline constexpr bool kIsCompletion = false;
template <>
inline constexpr bool kIsCompletion<no_signal> = true;
template <class T>
inline constexpr bool kIsCompletion<iris::signal_set<T>> = true;
template <class T>
inline constexpr bool kIsCompletion<iris::signal_add<T>> = true;

}  // namespace detail

}  // namespace iris::device
