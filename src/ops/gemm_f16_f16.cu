// One CUTLASS kernel per translation unit (they take long to compile): PlainGemm<cutlass::half_t,
// cutlass::half_t>.
#include "iris/ops/detail/gemm_kernel.hpp"

namespace iris::ops::detail {

std::unique_ptr<GemmRunner> make_gemm_f16_f16() {
  return std::make_unique<CutlassRunner<PlainGemm<cutlass::half_t, cutlass::half_t>>>();
}

}  // namespace iris::ops::detail
