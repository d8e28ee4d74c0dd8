// Bodies behind iris/device/rma.hpp: one byte-range mover serves every group and every call.
// Not public.
#pragma once

#include <cstdint>

#include "iris/device/debug.hpp"
#include "iris/device/detail/report.hpp"
#include "iris/device/detail/signal_impl.hpp"
#include "iris/device/rma.hpp"

namespace iris::device::detail {

/// A run-time slice of a group: `size` threads, this one being `rank`. Groups of every type
/// reduce to it, and 2-D copies cut a group into slices of a warp each.
struct slice {
  std::size_t rank;
  std::size_t size;
};

IRIS_DEVICE_FN IRIS_FORCEINLINE constexpr std::size_t smaller(std::size_t a, std::size_t b) {
  return a < b ? a : b;
}

template <class G>
IRIS_DEVICE_FN IRIS_FORCEINLINE slice slice_of(const G& group) {
  return {static_cast<std::size_t>(group.thread_rank()),
          static_cast<std::size_t>(group.num_threads())};
}

/// The unsigned type that moves `Bytes` bytes in one access (16: one 128-bit LDG/STG).
template <std::size_t Bytes>
using unit_t = cuda::std::conditional_t<
    Bytes == 16, uint4,
    cuda::std::conditional_t<
        Bytes == 8, std::uint64_t,
        cuda::std::conditional_t<
            Bytes == 4, std::uint32_t,
            cuda::std::conditional_t<Bytes == 2, std::uint16_t, std::uint8_t>>>>;

/// The slice moves `units` units of `Bytes` bytes; member r takes units r, r + size, ...
/// `InFlight` loads are issued before their stores, also in the last, partial batch: a member
/// waits on memory once per batch, never once per leftover unit. The batch loop is not unrolled:
/// for warps and threads (a constant slice size) unrolling it costs registers, and with them
/// resident blocks.
template <std::size_t Bytes, int InFlight>
IRIS_DEVICE_FN IRIS_FORCEINLINE void copy_units(slice t, std::byte* dst, const std::byte* src,
                                                std::size_t units) {
  using Unit = unit_t<Bytes>;
  auto* d = reinterpret_cast<Unit*>(dst);
  const auto* s = reinterpret_cast<const Unit*>(src);
#pragma unroll 1
  for (std::size_t i = t.rank; i < units; i += InFlight * t.size) {
    Unit v[InFlight];
#pragma unroll
    for (int k = 0; k < InFlight; ++k)
      if (i + k * t.size < units) v[k] = s[i + k * t.size];
#pragma unroll
    for (int k = 0; k < InFlight; ++k)
      if (i + k * t.size < units) d[i + k * t.size] = v[k];
  }
}

/// Moves `bytes` bytes; both pointers and `bytes` are multiples of MinAlign. Tries units of
/// `Unit` bytes first: usable when dst and src sit at the same offset modulo Unit, after a head
/// of MinAlign-sized units that reaches a Unit boundary; otherwise halves the unit.
template <std::size_t Unit, std::size_t MinAlign, int InFlight>
IRIS_DEVICE_FN void copy_bytes(slice t, std::byte* dst, const std::byte* src, std::size_t bytes) {
  const auto d = reinterpret_cast<std::uintptr_t>(dst);
  // The common case first, on the shortest path: whole units from aligned addresses.
  if ((d | reinterpret_cast<std::uintptr_t>(src) | bytes) % Unit == 0)
    return copy_units<Unit, InFlight>(t, dst, src, bytes / Unit);
  if constexpr (Unit > MinAlign) {
    if ((d ^ reinterpret_cast<std::uintptr_t>(src)) % Unit != 0)
      return copy_bytes<Unit / 2, MinAlign, InFlight>(t, dst, src, bytes);
  }
  const std::size_t head = smaller(bytes, (Unit - d % Unit) % Unit);
  const std::size_t body = (bytes - head) / Unit * Unit;
  copy_units<MinAlign, 1>(t, dst, src, head / MinAlign);
  copy_units<Unit, InFlight>(t, dst + head, src + head, body / Unit);
  copy_units<MinAlign, 1>(t, dst + head + body, src + head + body,
                          (bytes - head - body) / MinAlign);
}

template <class T>
inline constexpr std::size_t kMinAlign = alignof(T) < 16 ? alignof(T) : 16;

template <int InFlight, class T>
IRIS_DEVICE_FN IRIS_FORCEINLINE void copy_elements(slice t, T* dst, const T* src,
                                                   std::size_t count) {
  static_assert(cuda::std::is_trivially_copyable_v<T>, "iris: only trivially copyable data moves");
  static_assert(InFlight >= 1 && InFlight <= 16,
                "iris: get/put/copy keep 1 to 16 vectors in flight per thread");
  copy_bytes<16, kMinAlign<T>, InFlight>(t, reinterpret_cast<std::byte*>(dst),
                                         reinterpret_cast<const std::byte*>(src),
                                         count * sizeof(T));
}

/// 2-D: contiguous tiles go as one range; otherwise each row goes to a slice of up to 32
/// threads (a warp of the group), so that every row is read and written coalesced.
template <int InFlight, class T>
IRIS_DEVICE_FN void copy_tile(slice t, tile_view<T> dst, tile_view<const T> src) {
  if (dst.rows <= 1 || (dst.row_stride == dst.cols && src.row_stride == src.cols))
    return copy_elements<InFlight>(t, dst.data, src.data, dst.rows * dst.cols);
  constexpr std::size_t kTeam = 32;
  const std::size_t teams = (t.size + kTeam - 1) / kTeam;
  const std::size_t mine = t.rank / kTeam;
  const slice row_team{t.rank % kTeam, smaller(kTeam, t.size - mine * kTeam)};
  for (std::size_t row = mine; row < dst.rows; row += teams)
    copy_elements<InFlight>(row_team, dst.data + row * dst.row_stride,
                            src.data + row * src.row_stride, dst.cols);
}

template <class Signal>
IRIS_DEVICE_FN IRIS_FORCEINLINE constexpr void check_signal() {
  static_assert(kIsCompletion<Signal>,
                "iris: the last argument of put/copy is a completion action: "
                "iris::device::signal_set(flag, value) or iris::device::signal_add(flag, value)");
}

template <class T>
IRIS_DEVICE_FN IRIS_FORCEINLINE void check_same_shape(const Context& ctx, const char* operation,
                                                      const tile_view<T>& dst,
                                                      const tile_view<const T>& src) {
  if (ctx.debug_checks() && (dst.rows != src.rows || dst.cols != src.cols)) {
    report_and_trap(ctx, {.kind = ErrorKind::kShapeMismatch,
                          .operation = operation,
                          .target_rank = ctx.rank(),
                          .heap_offset = local_heap_offset(ctx, dst.data),
                          .expected = (std::uint64_t{dst.rows} << 32) | dst.cols,
                          .observed = (std::uint64_t{src.rows} << 32) | src.cols});
  }
}

/// Member `rank` of a group's slice [rank*N, rank*N + N) of `count` elements: how many exist.
template <std::size_t N>
IRIS_DEVICE_FN IRIS_FORCEINLINE std::size_t elements_of_member(std::size_t rank,
                                                               std::size_t count) {
  const std::size_t first = rank * N;
  return first >= count ? 0 : smaller(N, count - first);
}

template <std::size_t N, class T>
IRIS_DEVICE_FN IRIS_FORCEINLINE bool moves_as_vectors(const T* p, std::size_t valid) {
  return (N * sizeof(T)) % 16 == 0 && valid == N && reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

}  // namespace iris::device::detail

namespace iris::device {

template <class T>
IRIS_DEVICE_FN T load(const Context& ctx, const T* src, int from) {
  return *detail::checked_translate(ctx, "load", src, 1, from);
}

template <class T>
IRIS_DEVICE_FN void store(const Context& ctx, T* dst, cuda::std::type_identity_t<T> value, int to) {
  *detail::checked_translate(ctx, "store", dst, 1, to) = value;
}

template <std::size_t N, cooperative_group G, class T>
IRIS_DEVICE_FN cuda::std::array<T, N> load(G group, const Context& ctx, const T* src,
                                           std::size_t count, int from) {
  const std::size_t first = std::size_t{group.thread_rank()} * N;
  const std::size_t valid = detail::elements_of_member<N>(group.thread_rank(), count);
  const T* p = detail::checked_translate(ctx, "load", src, count, from) + first;
  cuda::std::array<T, N> out{};
  if constexpr ((N * sizeof(T)) % 16 == 0) {
    if (detail::moves_as_vectors<N>(p, valid)) {
      cuda::std::array<uint4, N * sizeof(T) / 16> raw;
#pragma unroll
      for (std::size_t k = 0; k < raw.size(); ++k) raw[k] = reinterpret_cast<const uint4*>(p)[k];
      return detail::bits_as<cuda::std::array<T, N>>(raw);
    }
  }
#pragma unroll
  for (std::size_t i = 0; i < N; ++i)
    if (i < valid) out[i] = p[i];
  return out;
}

template <cooperative_group G, class T, std::size_t N>
IRIS_DEVICE_FN void store(G group, const Context& ctx, T* dst, const cuda::std::array<T, N>& values,
                          std::size_t count, int to) {
  const std::size_t first = std::size_t{group.thread_rank()} * N;
  const std::size_t valid = detail::elements_of_member<N>(group.thread_rank(), count);
  T* p = detail::checked_translate(ctx, "store", dst, count, to) + first;
  if constexpr ((N * sizeof(T)) % 16 == 0) {
    if (detail::moves_as_vectors<N>(p, valid)) {
      const auto raw = detail::bits_as<cuda::std::array<uint4, N * sizeof(T) / 16>>(values);
#pragma unroll
      for (std::size_t k = 0; k < raw.size(); ++k) reinterpret_cast<uint4*>(p)[k] = raw[k];
      return;
    }
  }
#pragma unroll
  for (std::size_t i = 0; i < N; ++i)
    if (i < valid) p[i] = values[i];
}

template <int InFlight, cooperative_group G, class T>
IRIS_DEVICE_FN void get(G group, const Context& ctx, T* dst, const T* src, std::size_t count,
                        int from) {
  detail::copy_elements<InFlight>(detail::slice_of(group), dst,
                                  detail::checked_translate(ctx, "get", src, count, from), count);
}

template <int InFlight, cooperative_group G, class T, class Signal>
IRIS_DEVICE_FN void put(G group, const Context& ctx, T* dst, const T* src, std::size_t count,
                        int to, Signal signal) {
  detail::check_signal<Signal>();
  detail::copy_elements<InFlight>(
      detail::slice_of(group), detail::checked_translate(ctx, "put", dst, count, to), src, count);
  detail::complete(group, ctx, signal, to);
}

template <int InFlight, cooperative_group G, class T, class Signal>
IRIS_DEVICE_FN void copy(G group, const Context& ctx, T* dst, const T* src, std::size_t count,
                         int to, int from, Signal signal) {
  detail::check_signal<Signal>();
  detail::copy_elements<InFlight>(detail::slice_of(group),
                                  detail::checked_translate(ctx, "copy", dst, count, to),
                                  detail::checked_translate(ctx, "copy", src, count, from), count);
  detail::complete(group, ctx, signal, to);
}

template <int InFlight, cooperative_group G, class T>
IRIS_DEVICE_FN void get(G group, const Context& ctx, tile_view<T> dst,
                        cuda::std::type_identity_t<tile_view<const T>> src, int from) {
  detail::check_same_shape(ctx, "get", dst, src);
  detail::copy_tile<InFlight>(detail::slice_of(group), dst,
                              detail::checked_translate(ctx, "get", src, from));
}

template <int InFlight, cooperative_group G, class T, class Signal>
IRIS_DEVICE_FN void put(G group, const Context& ctx, tile_view<T> dst,
                        cuda::std::type_identity_t<tile_view<const T>> src, int to, Signal signal) {
  detail::check_signal<Signal>();
  detail::check_same_shape(ctx, "put", dst, src);
  detail::copy_tile<InFlight>(detail::slice_of(group),
                              detail::checked_translate(ctx, "put", dst, to), src);
  detail::complete(group, ctx, signal, to);
}

template <int InFlight, cooperative_group G, class T, class Signal>
IRIS_DEVICE_FN void copy(G group, const Context& ctx, tile_view<T> dst,
                         cuda::std::type_identity_t<tile_view<const T>> src, int to, int from,
                         Signal signal) {
  detail::check_signal<Signal>();
  detail::check_same_shape(ctx, "copy", dst, src);
  detail::copy_tile<InFlight>(detail::slice_of(group),
                              detail::checked_translate(ctx, "copy", dst, to),
                              detail::checked_translate(ctx, "copy", src, from));
  detail::complete(group, ctx, signal, to);
}

}  // namespace iris::device
