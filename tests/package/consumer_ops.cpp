// Links iris::ops from the package and asks it a host-only question, so it runs without a GPU:
// the installed library must link without CUTLASS on the consumer's include path.
#include <cstdio>

#include "iris/ops/gemm.hpp"

int main() {
  // N = 100 bf16 columns: not a multiple of 16 bytes, which TMA needs, so can_implement refuses.
  const iris::ops::GemmArguments args{.m = 128, .n = 100, .k = 64};
  const iris::ops::Status status = iris::ops::Gemm::can_implement(args);
  std::printf("iris::ops linked; can_implement(m 128, n 100, k 64): %s%s\n",
              status ? "accepted" : "refused: ", status.message.c_str());
  return status ? 1 : 0;
}
