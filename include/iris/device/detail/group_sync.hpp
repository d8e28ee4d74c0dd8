// group.sync() as the device API's calls make it: with the Context at hand, a group that cannot
// sync is reported before the trap. Not public.
#pragma once

#include <cuda/std/type_traits>

#include <cstdint>

#include "iris/device/coop.hpp"
#include "iris/device/detail/report.hpp"
#include "iris/device/detail/thread_index.hpp"

namespace iris::device::detail {

/// iris::warps<N> with N > 1: the groups that sync on named barrier 8 + group index.
template <class G>
inline constexpr bool kNamedBarrierWarps = false;
template <unsigned N>
inline constexpr bool kNamedBarrierWarps<iris::warps<N>> = (N > 1);

/// blockDim packed for a report: x << 40 | y << 20 | z.
IRIS_DEVICE_FN IRIS_FORCEINLINE std::uint64_t packed_block_dim() {
  return std::uint64_t{blockDim.x} << 40 | std::uint64_t{blockDim.y} << 20 | blockDim.z;
}

[[noreturn]] __noinline__ IRIS_DEVICE_FN inline void report_too_many_warp_groups(
    const Context& ctx, const char* operation, unsigned group, unsigned warps_per_group) {
  report_and_trap(ctx, {.kind = ErrorKind::kTooManyWarpGroups,
                        .operation = operation,
                        .target_rank = ctx.rank(),
                        .bytes = packed_block_dim(),
                        .expected = warps_per_group,
                        .observed = group});
}

/// Syncs `group`; an iris::warps<N> group past the eighth (no named barrier left for it) is
/// reported under `operation` and traps.
template <class G>
IRIS_DEVICE_FN IRIS_FORCEINLINE void group_sync(const G& group, const Context& ctx,
                                                const char* operation) {
  if constexpr (kNamedBarrierWarps<G>) {
    const unsigned k = G::index();
    if (k >= kWarpsMaxGroups) report_too_many_warp_groups(ctx, operation, k, G::num_threads() / 32);
  }
  group.sync();
}

}  // namespace iris::device::detail
