// Symmetric tiles: a 2-D view of heap memory that can be moved to any rank in one step.
//
// Translate once per tile, then the code that wrote to local memory writes to the peer:
//
//   iris::device::tile_view out(c + m0 * ldc + n0, BLK_M, BLK_N, ldc);  // (BLK_M,BLK_N)
//   auto remote = iris::device::translate(ctx, out, peer);   // same tile, on rank `peer`
//   for (...) remote(i, j) = acc[i][j];                      // plain stores over NVLink
//
// The same works for CuTe/CUTLASS epilogues: translate the tensor's base pointer once and rebuild
// the tensor with the same layout, e.g.
//   auto gD_peer = cute::make_tensor(cute::make_gmem_ptr(ctx.translate(gD.data().get(), peer,
//                      cute::cosize(gD.layout()))), gD.layout());
// Stores through a translated pointer are plain (weak) stores: publish them as
// iris/device/signal.hpp says (the one rule): the group that stored syncs and one member
// releases a flag, e.g. iris::device::signal(group, ctx, iris::device::signal_add(flag, 1), peer),
// or a barrier. No per-thread fence is needed.
#pragma once

#include <cuda/std/type_traits>

#include <cstddef>

#include "iris/device/context.hpp"
#include "iris/device/debug.hpp"
#include "iris/device/detail/config.hpp"

namespace iris::device {

/// `rows` x `cols` elements starting at `data`, consecutive rows `row_stride` elements apart
/// (row_stride >= cols). A view: it owns nothing. tile_view<T> converts to tile_view<const T>.
template <class T>
struct tile_view {
  T* data = nullptr;
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::size_t row_stride = 0;

  IRIS_HOST_DEVICE T& operator()(std::size_t row, std::size_t col) const {
    return data[row * row_stride + col];
  }
  /// Elements from the first to one past the last (what the tile spans in memory).
  IRIS_HOST_DEVICE std::size_t span() const {
    return rows == 0 ? 0 : (rows - 1) * row_stride + cols;
  }
  template <class U>
    requires(cuda::std::is_same_v<U, const T> && !cuda::std::is_const_v<T>)
  IRIS_HOST_DEVICE operator tile_view<U>() const {
    return {data, rows, cols, row_stride};
  }
};

template <class T>
tile_view(T*, std::size_t, std::size_t, std::size_t) -> tile_view<T>;

/// The same tile on rank `to`: ctx.translate of the tile's base, checked for the tile's whole
/// span. With debug checks on, the span must lie inside this rank's heap and `to` must be a rank.
///   auto remote = iris::device::translate(ctx, tile, peer);
template <class T>
IRIS_DEVICE_FN tile_view<T> translate(const Context& ctx, const tile_view<T>& tile, int to);

}  // namespace iris::device

#include "iris/device/detail/tile_impl.hpp"
