// One CUTLASS kernel per translation unit (they take long to compile): the workgroup-specialized
// GEMM + all-scatter kernel, bf16 -> bf16 (WorkgroupSpecializedConfig, the send loop as side role).
#include "iris/ops/detail/workgroup_specialized_kernel.hpp"

namespace iris::ops::detail {

std::unique_ptr<WorkgroupSpecializedGemm<SendTiles>> make_gemm_and_send_bf16() {
  return std::make_unique<WorkgroupSpecializedRunner<
      WorkgroupSpecializedConfig<cutlass::bfloat16_t, cutlass::bfloat16_t>, SendTiles>>();
}

}  // namespace iris::ops::detail
