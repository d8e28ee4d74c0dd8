// 11_gemm_all_scatter_fused_sequential — the GEMM's epilogue stores each finished tile straight
// into every rank's C and raises that tile's flag there.
//
// Teaches: the Iris idea in its smallest form. The epilogue that wrote a tile to local memory
// translates the tile's address once per rank and runs the same stores against the peer
// (iris::device::put of a tile_view), then signal_add on each rank's per-tile flag publishes it.
// docs/ops.md shows the epilogue's diff against a local-store epilogue (a handful of lines).
// Tiles leave while the GEMM is still computing the next ones; no SM split, no second stream.
//
//   iris-run -n 4 ./example_11_gemm_all_scatter_fused_sequential [--m 2048 --n 1024 --k 256]
#include "common/gemm_all_scatter.cuh"

int main(int argc, char** argv) {
  return example::run(argc, argv, iris::ops::AllScatterPattern::kFusedSequential);
}
