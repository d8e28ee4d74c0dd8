// One CUTLASS kernel per translation unit (they take long to compile):
// SwapABGemm<cutlass::bfloat16_t, cutlass::bfloat16_t>, the swap-AB configuration.
#include "iris/ops/detail/gemm_kernel.hpp"

namespace iris::ops::detail {

std::unique_ptr<GemmRunner> make_swap_ab_gemm_bf16() {
  return std::make_unique<CutlassRunner<SwapABGemm<cutlass::bfloat16_t, cutlass::bfloat16_t>>>();
}

}  // namespace iris::ops::detail
