// 10_gemm_all_scatter_bulk_synchronous — GEMM + all-scatter, the baseline: first the GEMM
// writes this rank's column block of C, then an all-gather moves every block to every rank.
//
// Teaches: the pattern every fused one is measured against. Communication starts only when the
// whole GEMM is done, so its time adds to the GEMM's. Examples 11 and 12 overlap the two.
//
//   iris-run -n 4 ./example_10_gemm_all_scatter_bulk_synchronous [--m 2048 --n 1024 --k 256]
#include "common/gemm_all_scatter.cuh"

int main(int argc, char** argv) {
  return example::run(argc, argv, iris::ops::AllScatterPattern::kBulkSynchronous);
}
