// Bodies behind iris/device/signal.hpp, and the completion actions of put/copy. Not public.
#pragma once

#include "iris/device/debug.hpp"
#include "iris/device/detail/group_sync.hpp"
#include "iris/device/detail/ptx.hpp"
#include "iris/device/detail/wait.hpp"
#include "iris/device/signal.hpp"

namespace iris::device {

namespace detail {
template <class T>
IRIS_DEVICE_FN IRIS_FORCEINLINE constexpr void check_flag_type() {
  static_assert(flag_value<T>, "iris: flags are 32- or 64-bit integers (e.g. std::uint64_t)");
}

/// Runs `action` on rank `to`'s copy of its flag, with release at system scope.
template <class T, signal_op Op>
IRIS_DEVICE_FN IRIS_FORCEINLINE void raise(const Context& ctx, const signal_action<T, Op>& action,
                                           int to) {
  if constexpr (Op == signal_op::set) {
    device::signal_set(ctx, action.flag, action.value, to);
  } else {
    device::signal_add(ctx, action.flag, action.value, to);
  }
}

template <class G>
IRIS_DEVICE_FN IRIS_FORCEINLINE constexpr void check_signalling_group() {
  static_assert(synchronizable_group<G>,
                "iris: a signal after data needs a group that can sync (thread, warp, warps<N>, "
                "warp_span, block, or a Cooperative Groups object); for the whole grid, raise the "
                "flag after barrier(iris::grid{}, ctx)");
}
}  // namespace detail

template <class T, class Order, class Scope>
IRIS_DEVICE_FN void signal_set(const Context& ctx, T* flag, cuda::std::type_identity_t<T> value,
                               int to, Order, Scope) {
  detail::check_flag_type<T>();
  detail::check_tags<access::store, Order, Scope>();
  using Bits = detail::flag_bits_t<T>;
  auto* target = detail::checked_translate(ctx, "signal_set", flag, 1, to);
  detail::ptx<Order::value, Scope::value>::store(reinterpret_cast<Bits*>(target),
                                                 static_cast<Bits>(value));
}

template <class T, class Order, class Scope>
IRIS_DEVICE_FN void signal_add(const Context& ctx, T* flag, cuda::std::type_identity_t<T> value,
                               int to, Order, Scope) {
  detail::check_flag_type<T>();
  detail::check_tags<access::store, Order, Scope>();
  using Bits = detail::flag_bits_t<T>;
  auto* target = detail::checked_translate(ctx, "signal_add", flag, 1, to);
  detail::ptx<Order::value, Scope::value>::reduce_add(reinterpret_cast<Bits*>(target),
                                                      static_cast<Bits>(value));
}

template <class T, class Order, class Scope>
IRIS_DEVICE_FN T wait_until(const Context& ctx, const T* flag, cmp c,
                            cuda::std::type_identity_t<T> value, Order, Scope) {
  detail::check_flag_type<T>();
  detail::check_tags<access::load, Order, Scope>();
  check_access(ctx, "wait_until", flag, sizeof(T), ctx.rank());
  return detail::wait_for<Order::value, Scope::value>(ctx, "wait_until", flag, ctx.rank(), c,
                                                      static_cast<T>(value));
}

template <synchronizable_group G, class T, class Order, class Scope>
IRIS_DEVICE_FN T wait_until(G group, const Context& ctx, const T* flag, cmp c,
                            cuda::std::type_identity_t<T> value, Order order, Scope scope) {
  if constexpr (cuda::std::is_same_v<G, iris::thread>) {
    return wait_until(ctx, flag, c, value, order, scope);
  } else {
    // The lowest converged lane of each warp spins and shares what it saw with its lanes; if the
    // warp is split, each converged part does the same on its own, which is still correct.
    const unsigned lanes = __activemask();
    const int leader = __ffs(lanes) - 1;
    T seen{};
    if (static_cast<int>(detail::lane_index()) == leader)
      seen = wait_until(ctx, flag, c, value, order, scope);
    seen = __shfl_sync(lanes, seen, leader);
    // Hands what the spinning threads acquired to every member.
    detail::group_sync(group, ctx, "wait_until");
    return seen;
  }
}

template <synchronizable_group G, class T, signal_op Op>
IRIS_DEVICE_FN void signal(G group, const Context& ctx, signal_action<T, Op> action, int to) {
  detail::group_sync(group, ctx, "signal");
  if (group.thread_rank() == 0) detail::raise(ctx, action, to);
}

template <synchronizable_group G, class T, signal_op Op>
IRIS_DEVICE_FN void signal(G group, const Context& ctx, signal_action<T, Op> action,
                           const team& t) {
  detail::check_member(ctx, "signal", t, 0);
  detail::group_sync(group, ctx, "signal");
  const int n = static_cast<int>(group.num_threads());
  for (int i = static_cast<int>(group.thread_rank()); i < t.size; i += n)
    detail::raise(ctx, action, t.world_rank(i));
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

/// Runs a put/copy's completion action: signal(group, ...) on rank `to` (the group syncs, then
/// its leader releases the flag), or nothing for no_signal.
template <class G, class Action>
IRIS_DEVICE_FN IRIS_FORCEINLINE void complete(G group, const Context& ctx, const Action& action,
                                              int to) {
  if constexpr (!cuda::std::is_same_v<Action, no_signal>) {
    check_signalling_group<G>();
    if constexpr (synchronizable_group<G>) device::signal(group, ctx, action, to);
  }
}

template <class A>
inline constexpr bool kIsCompletion = false;
template <>
inline constexpr bool kIsCompletion<no_signal> = true;
template <class T, signal_op Op>
inline constexpr bool kIsCompletion<signal_action<T, Op>> = true;

}  // namespace detail

}  // namespace iris::device
