// One CUTLASS kernel per translation unit (they take long to compile):
// PlainGemm<cutlass::bfloat16_t, cutlass::bfloat16_t>.
#include "iris/ops/detail/gemm_kernel.hpp"

namespace iris::ops::detail {

std::unique_ptr<GemmRunner> make_gemm_bf16_bf16() {
  return std::make_unique<CutlassRunner<PlainGemm<cutlass::bfloat16_t, cutlass::bfloat16_t>>>();
}

}  // namespace iris::ops::detail
