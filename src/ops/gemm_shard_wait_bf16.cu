// One CUTLASS kernel per translation unit (they take long to compile): the shard-waiting GEMM,
// bf16 -> bf16 (ShardWaitConfig: a mainloop hook waits for each tile's A rows).
#include "iris/ops/detail/waiting_mainloop.hpp"

namespace iris::ops::detail {

std::unique_ptr<ShardWaitGemm> make_shard_wait_gemm_bf16() {
  return std::make_unique<
      ShardWaitRunner<ShardWaitConfig<cutlass::bfloat16_t, cutlass::bfloat16_t>>>();
}

}  // namespace iris::ops::detail
