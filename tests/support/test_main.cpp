// main() for every test executable. GPU and multi-rank tests (built with IRIS_TEST_NEEDS_GPU)
// exit with IRIS_TEST_SKIP_CODE when the machine has no CUDA device, which CTest reports as
// skipped rather than passed.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>

int main(int argc, char** argv) {
#if defined(IRIS_TEST_NEEDS_GPU)
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    std::printf("no CUDA device (%s): skipping GPU tests\n",
                status != cudaSuccess ? cudaGetErrorName(status) : "device count is 0");
    return IRIS_TEST_SKIP_CODE;
  }
#endif
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
