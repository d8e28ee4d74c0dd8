#include "iris/host/error.hpp"

#include <cstring>

namespace iris {

std::string_view to_string(Errc code) noexcept {
  switch (code) {
    case Errc::kInvalidArgument:
      return "invalid argument";
    case Errc::kCuda:
      return "cuda";
    case Errc::kOutOfMemory:
      return "out of memory";
    case Errc::kTimeout:
      return "timeout";
    case Errc::kDeviceTimeout:
      return "device timeout";
    case Errc::kBootstrap:
      return "bootstrap";
    case Errc::kMismatch:
      return "mismatch between ranks";
    case Errc::kSystem:
      return "system";
    case Errc::kUnsupported:
      return "unsupported";
    case Errc::kNoDevice:
      return "no device";
    case Errc::kInternal:
      return "internal error";
  }
  return "unknown";
}

namespace detail {
// The name of a CUDA status. This default (a weak symbol, for programs such as iris-run that
// link Iris's host code without CUDA) knows none; src/cuda_error.cpp, which every program that
// makes a CUDA call through Iris links, replaces it with the CUDA runtime's names.
[[gnu::weak]] const char* cuda_status_name(int /*status*/) noexcept {
  return nullptr;
}
}  // namespace detail

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
    const char* name = detail::cuda_status_name(cuda_status);
    text += " [cuda: ";
    text += name != nullptr ? name : "status";
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

void throw_system_error(int errno_value, const std::string& what, std::source_location where) {
  throw Error(Errc::kSystem, what + ": " + std::strerror(errno_value), 0, where);
}

}  // namespace detail
}  // namespace iris
