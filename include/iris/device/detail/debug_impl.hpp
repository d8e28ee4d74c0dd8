// Bodies behind iris/device/debug.hpp and the checks of Context::translate. Not public.
#pragma once

#include "iris/device/debug.hpp"
#include "iris/device/detail/report.hpp"

namespace iris::device {

IRIS_DEVICE_FN inline void check_access(const Context& ctx, const char* operation, const void* ptr,
                                        std::size_t bytes, int to) {
  if (!ctx.debug_checks()) return;
  if (to < 0 || to >= ctx.world_size()) {
    detail::report_and_trap(ctx, {.kind = detail::ErrorKind::kBadRank,
                                  .operation = operation,
                                  .target_rank = to,
                                  .heap_offset = detail::local_heap_offset(ctx, ptr),
                                  .bytes = bytes});
  }
  const std::int64_t offset = detail::local_heap_offset(ctx, ptr);
  const auto heap_size = static_cast<std::int64_t>(ctx.heap_size());
  if (offset < 0 || offset > heap_size || bytes > static_cast<std::size_t>(heap_size - offset)) {
    detail::report_and_trap(ctx, {.kind = detail::ErrorKind::kOutsideHeap,
                                  .operation = operation,
                                  .target_rank = to,
                                  .heap_offset = offset,
                                  .bytes = bytes});
  }
}

namespace detail {

IRIS_DEVICE_FN inline void check_member(const Context& ctx, const char* operation, const team& t,
                                        int member) {
  if (!ctx.debug_checks()) return;
  if (member < 0 || member >= t.size || !t.fits(ctx.world_size())) {
    report_and_trap(ctx, {.kind = ErrorKind::kBadMember,
                          .operation = operation,
                          .target_rank = member,
                          .expected = static_cast<std::uint64_t>(t.size),
                          .observed = static_cast<std::uint64_t>(t.start) << 32 |
                                      static_cast<std::uint32_t>(t.stride)});
  }
}

/// check_access + translate for the API's own calls, under the caller's name.
template <class T>
IRIS_DEVICE_FN IRIS_FORCEINLINE T* checked_translate(const Context& ctx, const char* operation,
                                                     T* ptr, std::size_t count, int to) {
  check_access(ctx, operation, ptr, count * sizeof(T), to);
  T* translated = ctx.translate_unchecked(ptr, to);
  // Every rank's heap is global memory: saying so lets the compiler use LDG/STG rather than
  // generic loads and stores.
  __builtin_assume(__isGlobal(translated));
  return translated;
}

}  // namespace detail

}  // namespace iris::device
