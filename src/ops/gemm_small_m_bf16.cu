// One CUTLASS kernel per translation unit (they take long to compile):
// SmallMGemm<cutlass::bfloat16_t, cutlass::bfloat16_t>, the small-M configuration.
#include "iris/ops/detail/gemm_kernel.hpp"

namespace iris::ops::detail {

std::unique_ptr<GemmRunner> make_small_m_gemm_bf16() {
  return std::make_unique<CutlassRunner<SmallMGemm<cutlass::bfloat16_t, cutlass::bfloat16_t>>>();
}

}  // namespace iris::ops::detail
