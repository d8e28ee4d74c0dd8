// 15_gemm_all_scatter_workgroup_specialized — one persistent kernel: its first blocks run the
// GEMM and raise a local flag per finished tile (release, system scope); its other blocks, in
// the same launch, wait for each flag (bounded) and push the tile to every peer.
//
// Teaches: splitting one kernel's blocks by role (CUTLASS's kernel for blocks below the GEMM's
// count, the send loop above it), why CUTLASS's persistent tile scheduler must then stride by
// the GEMM blocks rather than by the whole grid, and why the grid is sized to be resident at
// once with the other ranks sharing the GPU (docs/ops.md).
//
//   iris-run -n 4 ./example_15_gemm_all_scatter_workgroup_specialized [--m 2048 --n 1024 --k 256]
#include "common/gemm_all_scatter.cuh"

int main(int argc, char** argv) {
  return example::run(argc, argv, iris::ops::AllScatterPattern::kWorkgroupSpecialized);
}
