// One CUTLASS kernel per translation unit (they take long to compile): the workgroup-specialized
// GEMM + all-scatter kernel, fp16 -> fp16 (WorkgroupSpecializedConfig).
#include "iris/ops/detail/workgroup_specialized_kernel.hpp"

namespace iris::ops::detail {

std::unique_ptr<WorkgroupSpecializedGemm> make_workgroup_specialized_gemm_f16() {
  return std::make_unique<
      WorkgroupSpecializedRunner<WorkgroupSpecializedConfig<cutlass::half_t, cutlass::half_t>>>();
}

}  // namespace iris::ops::detail
