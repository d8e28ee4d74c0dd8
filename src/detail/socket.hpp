// Sockets, deadlines and file descriptors for the bootstrap, the fd exchange and iris-run.
//
// Every blocking step here is a poll() bounded by a Deadline, so nothing waits forever; every
// descriptor is close-on-exec and non-blocking; sends use MSG_NOSIGNAL, so a peer that vanished
// is an error return rather than a SIGPIPE.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace iris::detail {

/// Owns a file descriptor and closes it on destruction. Move-only; -1 means "none".
class UniqueFd {
 public:
  UniqueFd() noexcept = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  explicit operator bool() const noexcept { return valid(); }
  /// Gives up ownership without closing.
  int release() noexcept;
  /// Closes the descriptor held (if any) and takes `fd`.
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
};

using Clock = std::chrono::steady_clock;

/// The point in time by which an operation must finish, and the budget it was given (so that an
/// error can say "within 5 s").
class Deadline {
 public:
  explicit Deadline(std::chrono::nanoseconds budget) noexcept;
  Deadline(Clock::time_point at, std::chrono::nanoseconds budget) noexcept
      : at_(at), budget_(budget) {}

  bool expired() const noexcept { return Clock::now() >= at_; }
  Clock::time_point at() const noexcept { return at_; }
  std::chrono::nanoseconds budget() const noexcept { return budget_; }
  /// Milliseconds left, rounded up so that poll() does not wake just before the deadline; 0 once
  /// it has passed.
  int poll_timeout_ms() const noexcept;

 private:
  Clock::time_point at_;
  std::chrono::nanoseconds budget_;
};

/// Milliseconds from now until `at`, rounded up, for poll(); 0 if `at` has passed, -1 (wait
/// without limit) for Clock::time_point::max().
int poll_timeout_until(Clock::time_point at) noexcept;

/// "5 s", "0.5 s", "120 s": a duration as people write it in messages.
std::string format_seconds(std::chrono::nanoseconds duration);

/// A parsed socket address: "unix:@name" (Linux abstract namespace), "unix:/path" or
/// "tcp:host:port" ("tcp:[v6-address]:port"; an empty host is 127.0.0.1).
struct Endpoint {
  enum class Kind { kUnix, kTcp };
  Kind kind = Kind::kUnix;
  std::string address;  ///< unix: "@name" or a path; tcp: the host
  std::uint16_t port = 0;

  std::string to_string() const;
};

/// Parses an endpoint; throws iris::Error(kInvalidArgument) that quotes `text` and shows the
/// accepted forms.
Endpoint parse_endpoint(std::string_view text);

/// A non-blocking, close-on-exec socket listening at `endpoint`. `socket_type` is SOCK_STREAM or
/// SOCK_SEQPACKET (Unix only). Throws iris::Error(kSystem) naming the endpoint on failure.
UniqueFd listen_at(const Endpoint& endpoint, int socket_type, int backlog);

/// The endpoint a listener is bound to, with the port filled in when `requested` asked for 0.
Endpoint bound_endpoint(int listener, const Endpoint& requested);

/// One non-blocking connection attempt, bounded by `deadline`. Returns the connected socket
/// (non-blocking, close-on-exec, TCP_NODELAY for TCP), or an invalid UniqueFd with the reason
/// in `error` (an errno value) when the peer is not there (yet).
UniqueFd try_connect(const Endpoint& endpoint, int socket_type, const Deadline& deadline,
                     int& error);

/// Connects, retrying with backoff until `deadline`, since the listener may not be up yet.
/// Throws iris::Error(kTimeout) naming the endpoint and the last failure.
UniqueFd connect_with_retry(const Endpoint& endpoint, const Deadline& deadline);

/// Outcome of a bounded transfer.
enum class IoStatus {
  kOk,       ///< every byte was transferred
  kClosed,   ///< the peer closed the connection (or reset it) first
  kTimeout,  ///< the deadline passed first
};

/// Sends all `size` bytes on a (non-blocking) socket, waiting with poll() when it is full.
/// Throws iris::Error(kSystem) for errors other than the peer going away.
IoStatus send_all(int fd, const void* data, std::size_t size, const Deadline& deadline);

/// Receives exactly `size` bytes, waiting with poll() for more.
IoStatus recv_all(int fd, void* data, std::size_t size, const Deadline& deadline);

/// Writes all of `size` bytes to a file (a pipe, a terminal), retrying on EINTR and on partial
/// writes. Returns false when the reader is gone (EPIPE); other failures throw.
bool write_all(int fd, const void* data, std::size_t size);

/// `bytes` random bytes from the kernel (getrandom), as 2 * bytes lowercase hex digits.
std::string random_hex(std::size_t bytes);

/// Compares without stopping at the first difference, so that a secret cannot be guessed byte
/// by byte from response times.
bool equal_in_constant_time(std::string_view a, std::string_view b) noexcept;

}  // namespace iris::detail
