// Device side of iris::ops::Tracer: one event per call, nothing when tracing is off. Not public.
#pragma once

#include <cstdint>

#include "iris/device/detail/ptx.hpp"
#include "iris/ops/trace.hpp"

namespace iris::ops::detail {

__device__ __forceinline__ std::uint64_t trace_clock() {
  return iris::device::detail::global_timer_ns();
}

__device__ __forceinline__ unsigned trace_sm() {
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  return sm;
}

__device__ __forceinline__ void trace_record(const TraceBuffer& buffer, TraceKind kind, int rank,
                                             int tile, std::uint64_t start, std::uint64_t end) {
  if (buffer.events == nullptr) return;
  const unsigned slot = atomicAdd(buffer.count, 1u);
  if (slot < buffer.capacity)
    buffer.events[slot] = TraceEvent{start, end, kind, rank, tile, trace_sm()};
}

}  // namespace iris::ops::detail
