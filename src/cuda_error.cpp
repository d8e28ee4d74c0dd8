// The CUDA half of iris::Error: throwing for a failed CUDA call, and CUDA's names for statuses.
// Kept apart from error.cpp so that Iris's host code without CUDA (the rendezvous library that
// iris-run links) needs no CUDA runtime.
#include <cuda_runtime_api.h>

#include <string>

#include "iris/host/error.hpp"

namespace iris::detail {

// Replaces the weak default in error.cpp: every program that checks CUDA calls with
// IRIS_CUDA_CHECK links this file (throw_cuda_error is here), and with it these names.
const char* cuda_status_name(int status) noexcept {
  return cudaGetErrorName(static_cast<cudaError_t>(status));
}

void throw_cuda_error(int status, const char* expression, std::source_location where) {
  // Clear the non-sticky last error so that the next check does not report this one again.
  (void)cudaGetLastError();
  const char* text = cudaGetErrorString(static_cast<cudaError_t>(status));
  throw Error(Errc::kCuda, std::string(expression) + " failed: " + text, status, where);
}

}  // namespace iris::detail
