// Device fills behind Context::zeros/full/arange/uniform/normal.
#pragma once

#include <cuda_runtime_api.h>

#include "iris/host/context.hpp"

namespace iris::detail {

/// Writes the elements of `shape` at `data` (padding untouched) as `fill` says, on `stream`.
void launch_fill(void* data, const Shape& shape, const FillRequest& fill, cudaStream_t stream);

}  // namespace iris::detail
