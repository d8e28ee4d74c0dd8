// 12_gemm_all_scatter_producer_consumer — the GEMM on most SMs raises a local flag per finished
// tile (release, system scope); a communication kernel on the remaining SMs, on a second
// stream, waits for each flag (bounded) and pushes the tile to every peer.
//
// Teaches: splitting SMs between compute and communication (KernelHardwareInfo::sm_count for
// the GEMM, the rest for the sender), and why ranks that share one GPU must size the spinning
// kernel so that every rank's waiters leave whole SMs for the GEMMs (docs/ops.md).
//
//   iris-run -n 4 ./example_12_gemm_all_scatter_producer_consumer [--m 2048 --n 1024 --k 256]
#include "common/gemm_all_scatter.cuh"

int main(int argc, char** argv) {
  return example::run(argc, argv, iris::ops::AllScatterPattern::kProducerConsumer);
}
