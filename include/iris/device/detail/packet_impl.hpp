// Bodies behind iris/device/packet.hpp. Not public.
#pragma once

#include <cstdint>

#include "iris/device/debug.hpp"
#include "iris/device/detail/ptx.hpp"
#include "iris/device/detail/report.hpp"
#include "iris/device/detail/wait.hpp"
#include "iris/device/packet.hpp"

namespace iris::device::detail {

/// One 16-byte store as two 64-bit elements: each element is single-copy atomic (the PTX memory
/// model guarantees it for naturally aligned accesses up to 64 bits), which is all a packet
/// needs. volatile = relaxed at system scope, so the store is neither cached nor merged away.
IRIS_DEVICE_FN IRIS_FORCEINLINE void packet_store_raw(packet* p, std::uint64_t lo,
                                                      std::uint64_t hi) {
  asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(lo), "l"(hi) : "memory");
}

IRIS_DEVICE_FN IRIS_FORCEINLINE void packet_load_raw(const packet* p, std::uint64_t& lo,
                                                     std::uint64_t& hi) {
  asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];"
               : "=l"(lo), "=l"(hi)
               : "l"(p)
               : "memory");
}

IRIS_DEVICE_FN IRIS_FORCEINLINE std::uint64_t half_of(std::uint32_t data, std::uint32_t flag) {
  return static_cast<std::uint64_t>(flag) << 32 | data;
}

/// `about` names the operation (and the team, for a collective's packets); the rest is the wait's.
[[noreturn]] __noinline__ IRIS_DEVICE_FN inline void report_packet_timeout(
    const Context& ctx, const packet* slot, std::uint32_t flag, std::uint32_t seen, int from,
    std::uint64_t elapsed, Failure about) {
  about.kind = ErrorKind::kWaitTimeout;
  about.target_rank = ctx.rank();
  about.heap_offset = local_heap_offset(ctx, slot);
  about.bytes = sizeof(packet);
  about.comparison = cmp::eq;
  about.expected = flag;
  about.observed = seen;
  about.elapsed_ns = elapsed;
  about.awaited = Awaited::kPacket;
  about.awaited_rank = from;
  report_and_trap(ctx, about);
}

/// packet_wait, reporting a timeout under `about`'s operation (and team): what iris::ccl's
/// kernels wait with, so that the report names the collective.
IRIS_DEVICE_FN inline std::uint64_t packet_wait_as(const Context& ctx, const packet* slot,
                                                   std::uint32_t flag, int from,
                                                   const Failure& about) {
  std::uint64_t payload = 0;
  if (packet_poll(slot, flag, payload)) return payload;
  const std::uint64_t timeout = ctx.wait_timeout_ns();
  const std::uint64_t start = global_timer_ns();
  for (;;) {
#pragma unroll 1
    for (int spin = 0; spin < kSpinsPerClockRead; ++spin)
      if (packet_poll(slot, flag, payload)) return payload;
    const std::uint64_t elapsed = global_timer_ns() - start;
    if (timeout != 0 && elapsed > timeout) {
      std::uint64_t lo, hi;
      packet_load_raw(slot, lo, hi);
      const auto f0 = static_cast<std::uint32_t>(lo >> 32);
      const auto f1 = static_cast<std::uint32_t>(hi >> 32);
      report_packet_timeout(ctx, slot, flag, f0 != flag ? f0 : f1, from, elapsed, about);
    }
  }
}

/// Up to 8 bytes of `src` from byte `offset` (zeros past `bytes`), as one little-endian word.
IRIS_DEVICE_FN IRIS_FORCEINLINE std::uint64_t gather_word(const std::byte* src, std::size_t offset,
                                                          std::size_t bytes) {
  const std::byte* p = src + offset;
  if (offset + 8 <= bytes && reinterpret_cast<std::uintptr_t>(p) % 8 == 0)
    return *reinterpret_cast<const std::uint64_t*>(p);
  std::uint64_t word = 0;
  const std::size_t n = bytes - offset < 8 ? bytes - offset : 8;
  for (std::size_t i = 0; i < n; ++i)
    word |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(p[i])) << (8 * i);
  return word;
}

IRIS_DEVICE_FN IRIS_FORCEINLINE void scatter_word(std::byte* dst, std::size_t offset,
                                                  std::size_t bytes, std::uint64_t word) {
  std::byte* p = dst + offset;
  if (offset + 8 <= bytes && reinterpret_cast<std::uintptr_t>(p) % 8 == 0) {
    *reinterpret_cast<std::uint64_t*>(p) = word;
    return;
  }
  const std::size_t n = bytes - offset < 8 ? bytes - offset : 8;
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::byte>(word >> (8 * i));
}

}  // namespace iris::device::detail

namespace iris::device {

IRIS_DEVICE_FN inline void packet_put(const Context& ctx, packet* slot, std::uint64_t payload,
                                      std::uint32_t flag, int to) {
  packet* target = detail::checked_translate(ctx, "packet_put", slot, 1, to);
  detail::packet_store_raw(target, detail::half_of(static_cast<std::uint32_t>(payload), flag),
                           detail::half_of(static_cast<std::uint32_t>(payload >> 32), flag));
}

IRIS_DEVICE_FN inline void packet_empty(packet* slot) {
  detail::packet_store_raw(slot, 0, 0);
}

IRIS_DEVICE_FN inline bool packet_poll(const packet* slot, std::uint32_t flag,
                                       std::uint64_t& payload) {
  std::uint64_t lo, hi;
  detail::packet_load_raw(slot, lo, hi);
  if (static_cast<std::uint32_t>(lo >> 32) != flag || static_cast<std::uint32_t>(hi >> 32) != flag)
    return false;
  payload = (hi & 0xffffffffu) << 32 | (lo & 0xffffffffu);
  return true;
}

IRIS_DEVICE_FN inline std::uint64_t packet_wait(const Context& ctx, const packet* slot,
                                                std::uint32_t flag, int from) {
  return detail::packet_wait_as(ctx, slot, flag, from, {.operation = "packet_wait"});
}

template <cooperative_group G>
IRIS_DEVICE_FN void packet_put(G group, const Context& ctx, packet* slots, const void* src,
                               std::size_t bytes, std::uint32_t flag, int to) {
  const std::size_t n = packets_for(bytes);
  packet* target = detail::checked_translate(ctx, "packet_put", slots, n, to);
  const auto* s = static_cast<const std::byte*>(src);
  for (std::size_t i = group.thread_rank(); i < n; i += group.num_threads()) {
    const std::uint64_t word = detail::gather_word(s, i * kPacketPayloadBytes, bytes);
    detail::packet_store_raw(target + i, detail::half_of(static_cast<std::uint32_t>(word), flag),
                             detail::half_of(static_cast<std::uint32_t>(word >> 32), flag));
  }
}

template <cooperative_group G>
IRIS_DEVICE_FN void packet_get(G group, const Context& ctx, void* dst, const packet* slots,
                               std::size_t bytes, std::uint32_t flag, int from) {
  const std::size_t n = packets_for(bytes);
  check_access(ctx, "packet_get", slots, n * sizeof(packet), ctx.rank());
  auto* d = static_cast<std::byte*>(dst);
  for (std::size_t i = group.thread_rank(); i < n; i += group.num_threads())
    detail::scatter_word(d, i * kPacketPayloadBytes, bytes,
                         packet_wait(ctx, slots + i, flag, from));
}

}  // namespace iris::device
