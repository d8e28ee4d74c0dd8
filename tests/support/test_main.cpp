// main() for every test executable. GPU and multi-rank tests (this file compiled with
// IRIS_TEST_NEEDS_GPU) exit with IRIS_TEST_SKIP_CODE when the machine has no CUDA device, which
// CTest reports as skipped rather than passed.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

#if defined(IRIS_TEST_NEEDS_GPU)
bool is_mps_restarting(cudaError_t status) {
  return status == cudaErrorMpsServerNotReady || status == cudaErrorMpsConnectionFailed ||
         status == cudaErrorMpsRpcFailure || status == cudaErrorMpsClientTerminated;
}

// When a kernel traps under MPS (the trap tests do it on purpose), the MPS server refuses new
// clients until every process it served has exited. CUDA remembers a failed initialisation for
// the life of the process, so wait a moment and start this program afresh, a few times.
void restart_while_mps_recovers(cudaError_t status, char** argv) {
  constexpr int kAttempts = 15;
  const char* previous = std::getenv("IRIS_TEST_MPS_RESTARTS");
  const int restarts = previous ? std::atoi(previous) : 0;
  if (!is_mps_restarting(status) || restarts >= kAttempts) return;
  std::fprintf(stderr, "MPS is not ready (%s); starting again in 1 s (%d of %d)\n",
               cudaGetErrorName(status), restarts + 1, kAttempts);
  ::sleep(1);
  ::setenv("IRIS_TEST_MPS_RESTARTS", std::to_string(restarts + 1).c_str(), 1);
  ::execv("/proc/self/exe", argv);
}
#endif

}  // namespace

int main(int argc, char** argv) {
#if defined(IRIS_TEST_NEEDS_GPU)
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  restart_while_mps_recovers(status, argv);
  if (status != cudaSuccess || devices == 0) {
    std::printf("no usable CUDA device (%s): skipping GPU tests\n",
                status != cudaSuccess ? cudaGetErrorName(status) : "device count is 0");
    return IRIS_TEST_SKIP_CODE;
  }
#endif
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
