// Bodies behind iris/device/tile.hpp. Not public.
#pragma once

#include "iris/device/tile.hpp"

namespace iris::device {

namespace detail {
/// translate(ctx, tile, to) for the API's own calls, under the caller's name.
template <class T>
IRIS_DEVICE_FN IRIS_FORCEINLINE tile_view<T> checked_translate(const Context& ctx,
                                                               const char* operation,
                                                               const tile_view<T>& tile, int to) {
  return {checked_translate(ctx, operation, tile.data, tile.span(), to), tile.rows, tile.cols,
          tile.row_stride};
}
}  // namespace detail

template <class T>
IRIS_DEVICE_FN tile_view<T> translate(const Context& ctx, const tile_view<T>& tile, int to) {
  return detail::checked_translate(ctx, "translate", tile, to);
}

}  // namespace iris::device
