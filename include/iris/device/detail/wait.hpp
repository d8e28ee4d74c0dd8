// The bounded spin behind every wait (wait_until, barriers). Not public.
#pragma once

#include <cuda/std/bit>
#include <cuda/std/type_traits>

#include <cstdint>

#include "iris/device/cmp.hpp"
#include "iris/device/detail/ptx.hpp"
#include "iris/device/detail/report.hpp"

namespace iris::device::detail {

/// Polls between reads of the clock: rare enough to keep the loop a load and a compare, often
/// enough (a few hundred microseconds at worst) for any timeout people set.
inline constexpr int kSpinsPerClockRead = 256;

/// 32- and 64-bit integers: what flags, epochs and waits are made of.
template <class T>
concept flag_value = cuda::std::is_integral_v<T> && (sizeof(T) == 4 || sizeof(T) == 8);

template <class T>
using flag_bits_t = cuda::std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;

template <class T>
IRIS_DEVICE_FN IRIS_FORCEINLINE bool satisfies(T value, cmp c, T expected) {
  switch (c) {
    case cmp::eq:
      return value == expected;
    case cmp::ne:
      return value != expected;
    case cmp::lt:
      return value < expected;
    case cmp::le:
      return value <= expected;
    case cmp::gt:
      return value > expected;
    case cmp::ge:
      return value >= expected;
  }
  return false;
}

/// Who a wait waits for, when it is more than a flag (barriers): the report names them.
struct WaitingFor {
  Awaited what = Awaited::kFlag;
  int rank = -1;                                       ///< for Awaited::kRank and kChannelRank
  int channel = -1;                                    ///< for Awaited::kChannelRank
  int team_start = 0, team_size = 0, team_stride = 0;  ///< kChannelRank: the object's team
};

template <flag_value T>
[[noreturn]] __noinline__ IRIS_DEVICE_FN void report_timeout(const Context& ctx,
                                                             const char* operation, const T* flag,
                                                             int flag_rank, cmp c, T expected,
                                                             T observed, std::uint64_t elapsed_ns,
                                                             WaitingFor waiting_for) {
  constexpr bool kSigned = cuda::std::is_signed_v<T>;
  // Signed values travel sign-extended, so that the host can print them as 64-bit numbers.
  using Wide = cuda::std::conditional_t<kSigned, std::int64_t, std::uint64_t>;
  report_and_trap(ctx,
                  {.kind = ErrorKind::kWaitTimeout,
                   .operation = operation,
                   .target_rank = flag_rank,
                   .heap_offset = static_cast<const std::byte*>(static_cast<const void*>(flag)) -
                                  ctx.heap_base_of(flag_rank),
                   .bytes = sizeof(T),
                   .comparison = c,
                   .value_kind = kSigned ? ValueKind::kSigned : ValueKind::kUnsigned,
                   .expected = static_cast<std::uint64_t>(static_cast<Wide>(expected)),
                   .observed = static_cast<std::uint64_t>(static_cast<Wide>(observed)),
                   .elapsed_ns = elapsed_ns,
                   .awaited = waiting_for.what,
                   .awaited_rank = waiting_for.rank,
                   .channel = waiting_for.channel,
                   .team_start = waiting_for.team_start,
                   .team_size = waiting_for.team_size,
                   .team_stride = waiting_for.team_stride});
}

/// Spins until `*flag cmp expected` holds and returns the value that satisfied it; each read is
/// a strong load with `Order` at `Scope`. `flag` is an address in this process (rank
/// `flag_rank`'s heap) and only names it in the report. Past ctx.wait_timeout_ns() (0: never)
/// it reports and traps, naming `waiting_for`.
template <cuda::memory_order Order, cuda::thread_scope Scope, flag_value T>
IRIS_DEVICE_FN T wait_for(const Context& ctx, const char* operation, const T* flag, int flag_rank,
                          cmp c, T expected, WaitingFor waiting_for = {}) {
  using Bits = flag_bits_t<T>;
  const auto* bits = reinterpret_cast<const Bits*>(flag);
  T seen = cuda::std::bit_cast<T>(ptx<Order, Scope>::load(bits));
  if (satisfies(seen, c, expected)) return seen;
  const std::uint64_t timeout = ctx.wait_timeout_ns();
  const std::uint64_t start = global_timer_ns();
  for (;;) {
#pragma unroll 1
    for (int spin = 0; spin < kSpinsPerClockRead; ++spin) {
      seen = cuda::std::bit_cast<T>(ptx<Order, Scope>::load(bits));
      if (satisfies(seen, c, expected)) return seen;
    }
    const std::uint64_t elapsed = global_timer_ns() - start;
    if (timeout != 0 && elapsed > timeout)
      report_timeout(ctx, operation, flag, flag_rank, c, expected, seen, elapsed, waiting_for);
  }
}

}  // namespace iris::device::detail
