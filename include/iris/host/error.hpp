// Errors raised by the Iris host runtime.
//
// Every host-side failure is reported by throwing iris::Error. Library code never calls exit()
// or abort(): the caller decides what a failure means for the process.
#pragma once

#include <source_location>
#include <stdexcept>
#include <string>
#include <string_view>

namespace iris {

/// What kind of failure an iris::Error reports.
enum class Errc {
  kInvalidArgument,  ///< a caller passed a value outside the documented contract
  kCuda,             ///< a CUDA runtime or driver call failed; Error::cuda_status() has the code
  kOutOfMemory,      ///< the symmetric heap (or the device) cannot satisfy a request
  kTimeout,          ///< a host-side wait (bootstrap, barrier) ran past its deadline
  kDeviceTimeout,    ///< a bounded device-side wait ran past its deadline
  kBootstrap,        ///< rendezvous failed: wrong secret, wrong world size, a peer vanished
  kMismatch,         ///< ranks disagree on something they must agree on (allocation order, sizes)
  kSystem,           ///< an operating-system call failed; the message carries errno's text
  kUnsupported,      ///< the machine lacks a capability the request needs
  kNoDevice,         ///< no CUDA device is visible to this process (Context::from_env, Context)
  kInternal,         ///< a broken invariant inside Iris: please report it
};

/// Human-readable name of an error code ("invalid argument", "cuda", ...).
std::string_view to_string(Errc code) noexcept;

/// The exception every Iris host API throws.
///
/// what() reads "iris: <code>: <message> [cuda: <name> (<status>)] (at file:line)", so that a
/// log line names the cause, the CUDA status where there is one, and the call site.
class Error : public std::runtime_error {
 public:
  Error(Errc code, const std::string& message, int cuda_status = 0,
        std::source_location where = std::source_location::current());

  Errc code() const noexcept { return code_; }
  /// The cudaError_t / CUresult value, or 0 when the failure did not come from CUDA.
  int cuda_status() const noexcept { return cuda_status_; }
  /// The message without the decorations that what() adds.
  const std::string& message() const noexcept { return message_; }
  const std::source_location& where() const noexcept { return where_; }

 private:
  Errc code_;
  int cuda_status_;
  std::string message_;
  std::source_location where_;
};

namespace detail {
/// Throws iris::Error for a failed CUDA runtime call after clearing CUDA's last error, so that a
/// later, unrelated check does not report it again.
[[noreturn]] void throw_cuda_error(int status, const char* expression, std::source_location where);
/// Throws iris::Error(kSystem) with strerror(errno_value) appended to `what`.
[[noreturn]] void throw_system_error(int errno_value, const std::string& what,
                                     std::source_location where = std::source_location::current());
}  // namespace detail

}  // namespace iris

/// Checks a CUDA runtime call; on failure throws iris::Error(kCuda) naming the expression, the
/// CUDA error and the call site. Usable by applications as well as by the library.
#define IRIS_CUDA_CHECK(expr)                                              \
  do {                                                                     \
    const int iris_cuda_status_ = static_cast<int>(expr);                  \
    if (iris_cuda_status_ != 0)                                            \
      ::iris::detail::throw_cuda_error(iris_cuda_status_, #expr,           \
                                       ::std::source_location::current()); \
  } while (0)
