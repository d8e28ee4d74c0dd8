// One CUTLASS kernel per translation unit (they take long to compile): the workgroup-specialized
// GEMM + pull kernel of GemmReduceScatter and GemmAllReduce, bf16 -> bf16
// (WorkgroupSpecializedConfig, the pull reducer's loop as side role).
#include "iris/ops/detail/pull_reduce.cuh"
#include "iris/ops/detail/workgroup_specialized_kernel.hpp"

namespace iris::ops::detail {

std::unique_ptr<WorkgroupSpecializedGemm<PullTiles<__nv_bfloat16>>> make_gemm_and_pull_bf16() {
  return std::make_unique<WorkgroupSpecializedRunner<
      WorkgroupSpecializedConfig<cutlass::bfloat16_t, cutlass::bfloat16_t>,
      PullTiles<__nv_bfloat16>>>();
}

}  // namespace iris::ops::detail
