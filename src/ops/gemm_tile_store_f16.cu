// One CUTLASS kernel per translation unit (they take long to compile):
// TileStoreGemm<cutlass::half_t, cutlass::half_t>.
#include "iris/ops/detail/gemm_kernel.hpp"

namespace iris::ops::detail {

std::unique_ptr<GemmRunner> make_tile_store_gemm_f16() {
  return std::make_unique<CutlassRunner<TileStoreGemm<cutlass::half_t, cutlass::half_t>>>();
}

}  // namespace iris::ops::detail
