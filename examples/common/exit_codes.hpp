// Exit codes for the examples (and for programs that copy them): what a failed
// iris::Context::from_env() means for the shell.
//
//   int main() {
//     try { ... } catch (const iris::Error& error) {
//       std::fprintf(stderr, "%s\n", error.what());
//       return iris::examples::exit_code(error);
//     }
//   }
#pragma once

#include "iris/host/error.hpp"

namespace iris::examples {

/// No CUDA device is visible: there is nothing to run on. 77 is what CTest and automake take
/// as "skipped", so an example run as a test on a machine without a GPU is reported as skipped.
inline constexpr int kNoDeviceExitCode = 77;
/// A bad setting (an IRIS_* variable, an option): the user can fix it.
inline constexpr int kInvalidSettingExitCode = 2;
/// Anything else that Iris reported.
inline constexpr int kIrisErrorExitCode = 1;

/// The exit code for a program that stops because of `error`.
inline int exit_code(const iris::Error& error) noexcept {
  switch (error.code()) {
    case iris::Errc::kNoDevice:
      return kNoDeviceExitCode;
    case iris::Errc::kInvalidArgument:
      return kInvalidSettingExitCode;
    default:
      return kIrisErrorExitCode;
  }
}

}  // namespace iris::examples
