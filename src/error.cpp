#include "iris/host/error.hpp"

#include <cuda_runtime_api.h>

#include <cstring>

namespace iris {

std::string_view to_string(Errc code) noexcept {
  switch (code) {
    case Errc::kInvalidArgument: return "invalid argument";
    case Errc::kCuda: return "cuda";
    case Errc::kOutOfMemory: return "out of memory";
    case Errc::kTimeout: return "timeout";
    case Errc::kDeviceTimeout: return "device timeout";
    case Errc::kBootstrap: return "bootstrap";
    case Errc::kMismatch: return "mismatch between ranks";
    case Errc::kSystem: return "system";
    case Errc::kUnsupported: return "unsupported";
    case Errc::kInternal: return "internal error";
  }
  return "unknown";
}

namespace {
std::string format(Errc code, const std::string& message, int cuda_status,
                   const std::source_location& where) {
  std::string text = "iris: ";
  text += to_string(code);
  text += ": ";
  text += message;
  if (cuda_status != 0) {
    // Driver (CUresult) and runtime (cudaError_t) codes share their common values, and the
    // runtime's names are the ones users search for.
    text += " [cuda: ";
    text += cudaGetErrorName(static_cast<cudaError_t>(cuda_status));
    text += " (" + std::to_string(cuda_status) + ")]";
  }
  if (where.file_name() != nullptr && where.file_name()[0] != '\0') {
    const char* file = where.file_name();
    if (const char* slash = std::strrchr(file, '/')) file = slash + 1;
    text += " (at ";
    text += file;
    text += ":" + std::to_string(where.line()) + ")";
  }
  return text;
}
}  // namespace

Error::Error(Errc code, const std::string& message, int cuda_status, std::source_location where)
    : std::runtime_error(format(code, message, cuda_status, where)),
      code_(code),
      cuda_status_(cuda_status),
      message_(message),
      where_(where) {}

namespace detail {

void throw_cuda_error(int status, const char* expression, std::source_location where) {
  // Clear the non-sticky last error so that the next check does not report this one again.
  (void)cudaGetLastError();
  const char* text = cudaGetErrorString(static_cast<cudaError_t>(status));
  throw Error(Errc::kCuda, std::string(expression) + " failed: " + text, status, where);
}

void throw_system_error(int errno_value, const std::string& what, std::source_location where) {
  throw Error(Errc::kSystem, what + ": " + std::strerror(errno_value), 0, where);
}

}  // namespace detail
}  // namespace iris
