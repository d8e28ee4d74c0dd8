#include "detail/socket.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>

#include "iris/host/error.hpp"

namespace iris::detail {

int UniqueFd::release() noexcept {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void UniqueFd::reset(int fd) noexcept {
  // On Linux close() releases the descriptor even when it reports EINTR, so it is never retried
  // (a retry could close a descriptor another thread has just been given).
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

Deadline::Deadline(std::chrono::nanoseconds budget) noexcept
    : at_(Clock::now() + budget), budget_(budget) {}

int Deadline::poll_timeout_ms() const noexcept {
  return poll_timeout_until(at_);
}

int poll_timeout_until(Clock::time_point at) noexcept {
  if (at == Clock::time_point::max()) return -1;
  const auto left = at - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<long long>(ms, 1'000'000'000));
}

std::string format_seconds(std::chrono::nanoseconds duration) {
  const double seconds = std::chrono::duration<double>(duration).count();
  char text[64];
  std::snprintf(text, sizeof text, "%.3f", seconds);
  std::string out = text;
  out.erase(out.find_last_not_of('0') + 1);
  if (out.back() == '.') out.pop_back();
  return out + " s";
}

// ---------------------------------------------------------------------------------------------
// Endpoints

namespace {

constexpr std::string_view kEndpointForms =
    "unix:@name, unix:/path, tcp:host:port or tcp:[v6-address]:port";

[[noreturn]] void bad_endpoint(std::string_view text, std::string_view why) {
  throw Error(Errc::kInvalidArgument, "bad rendezvous endpoint '" + std::string(text) +
                                          "': " + std::string(why) + " (expected " +
                                          std::string(kEndpointForms) + ")");
}

Endpoint parse_tcp(std::string_view text, std::string_view rest) {
  Endpoint endpoint;
  endpoint.kind = Endpoint::Kind::kTcp;
  std::string_view port_text;
  if (rest.starts_with('[')) {
    const auto close = rest.find(']');
    if (close == std::string_view::npos || close + 1 >= rest.size() || rest[close + 1] != ':')
      bad_endpoint(text, "an IPv6 address must be written [address]:port");
    endpoint.address = std::string(rest.substr(1, close - 1));
    port_text = rest.substr(close + 2);
  } else {
    const auto colon = rest.rfind(':');
    if (colon == std::string_view::npos) bad_endpoint(text, "no port");
    endpoint.address = std::string(rest.substr(0, colon));
    port_text = rest.substr(colon + 1);
  }
  unsigned port = 0;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port_text.empty() ||
      port > 65535)
    bad_endpoint(text, "the port must be a number from 0 to 65535");
  endpoint.port = static_cast<std::uint16_t>(port);
  if (endpoint.address.empty()) endpoint.address = "127.0.0.1";
  return endpoint;
}

struct UnixAddress {
  sockaddr_un address{};
  socklen_t length = 0;
};

UnixAddress unix_address(const Endpoint& endpoint) {
  UnixAddress out;
  out.address.sun_family = AF_UNIX;
  const std::string& name = endpoint.address;
  // Abstract names start with a NUL byte instead of '@' and are not NUL-terminated.
  const bool abstract = name.starts_with('@');
  if (name.size() + (abstract ? 0 : 1) > sizeof(out.address.sun_path))
    throw Error(Errc::kInvalidArgument, "unix socket name too long (at most " +
                                            std::to_string(sizeof(out.address.sun_path) - 1) +
                                            " bytes): " + name);
  std::memcpy(out.address.sun_path, name.data(), name.size());
  if (abstract) out.address.sun_path[0] = '\0';
  out.length =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size() + (abstract ? 0 : 1));
  return out;
}

struct AddrinfoDeleter {
  void operator()(addrinfo* list) const noexcept { freeaddrinfo(list); }
};
using AddrinfoList = std::unique_ptr<addrinfo, AddrinfoDeleter>;

AddrinfoList resolve(const Endpoint& endpoint, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* list = nullptr;
  const std::string port = std::to_string(endpoint.port);
  const int status = getaddrinfo(endpoint.address.c_str(), port.c_str(), &hints, &list);
  if (status != 0)
    throw Error(Errc::kSystem, "cannot resolve host '" + endpoint.address + "' of " +
                                   endpoint.to_string() + ": " + gai_strerror(status));
  return AddrinfoList(list);
}

UniqueFd make_socket(int domain, int type) {
  UniqueFd fd(::socket(domain, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) throw_system_error(errno, "socket()");
  return fd;
}

void set_option(int fd, int level, int name, int value, const char* what) {
  if (::setsockopt(fd, level, name, &value, sizeof value) != 0) throw_system_error(errno, what);
}

// Waits until `fd` is ready for `events` (or reports an error / hang-up, which the caller's next
// call will reveal). Returns false when the deadline passes first.
bool wait_ready(int fd, short events, const Deadline& deadline) {
  for (;;) {
    pollfd entry{fd, events, 0};
    const int ready = ::poll(&entry, 1, deadline.poll_timeout_ms());
    if (ready > 0) return true;
    if (ready == 0) {
      if (deadline.expired()) return false;
      continue;  // woke a little early: the rounding of poll's timeout
    }
    if (errno != EINTR) throw_system_error(errno, "poll()");
  }
}

// Completes a non-blocking connect(): 0 on success, else the errno value.
int finish_connect(int fd, const Deadline& deadline) {
  if (!wait_ready(fd, POLLOUT, deadline)) return ETIMEDOUT;
  int error = 0;
  socklen_t length = sizeof error;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) return errno;
  return error;
}

int connect_socket(int fd, const sockaddr* address, socklen_t length, const Deadline& deadline) {
  while (::connect(fd, address, length) != 0) {
    if (errno == EINTR) continue;
    if (errno == EINPROGRESS) return finish_connect(fd, deadline);
    return errno;
  }
  return 0;
}

bool peer_gone(int error) {
  return error == EPIPE || error == ECONNRESET || error == ENOTCONN;
}

}  // namespace

std::string Endpoint::to_string() const {
  if (kind == Kind::kUnix) return "unix:" + address;
  const bool v6 = address.find(':') != std::string::npos;
  return "tcp:" + (v6 ? "[" + address + "]" : address) + ":" + std::to_string(port);
}

Endpoint parse_endpoint(std::string_view text) {
  if (text.starts_with("unix:")) {
    Endpoint endpoint;
    endpoint.address = std::string(text.substr(5));
    if (endpoint.address.empty() || endpoint.address == "@") bad_endpoint(text, "no socket name");
    return endpoint;
  }
  if (text.starts_with("tcp:")) return parse_tcp(text, text.substr(4));
  bad_endpoint(text, "unknown scheme");
}

UniqueFd listen_at(const Endpoint& endpoint, int socket_type, int backlog) {
  const std::string what = "cannot listen at " + endpoint.to_string();
  if (endpoint.kind == Endpoint::Kind::kUnix) {
    UniqueFd fd = make_socket(AF_UNIX, socket_type);
    const UnixAddress address = unix_address(endpoint);
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address.address), address.length) !=
            0 ||
        ::listen(fd.get(), backlog) != 0)
      throw_system_error(errno, what);
    return fd;
  }
  if (socket_type != SOCK_STREAM)
    throw Error(Errc::kInvalidArgument,
                "TCP endpoints carry byte streams only: " + endpoint.to_string());
  const AddrinfoList list = resolve(endpoint, /*passive=*/true);
  int error = EADDRNOTAVAIL;
  for (const addrinfo* entry = list.get(); entry != nullptr; entry = entry->ai_next) {
    UniqueFd fd = make_socket(entry->ai_family, SOCK_STREAM);
    // A job restarted on the same port must not wait for the old connections' TIME_WAIT.
    set_option(fd.get(), SOL_SOCKET, SO_REUSEADDR, 1, "setsockopt(SO_REUSEADDR)");
    if (::bind(fd.get(), entry->ai_addr, entry->ai_addrlen) == 0 &&
        ::listen(fd.get(), backlog) == 0)
      return fd;
    error = errno;
  }
  throw_system_error(error, what);
}

Endpoint bound_endpoint(int listener, const Endpoint& requested) {
  Endpoint out = requested;
  if (requested.kind != Endpoint::Kind::kTcp) return out;
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0)
    throw_system_error(errno, "getsockname()");
  if (address.ss_family == AF_INET6)
    out.port = ntohs(reinterpret_cast<const sockaddr_in6*>(&address)->sin6_port);
  else
    out.port = ntohs(reinterpret_cast<const sockaddr_in*>(&address)->sin_port);
  return out;
}

UniqueFd try_connect(const Endpoint& endpoint, int socket_type, const Deadline& deadline,
                     int& error) {
  if (endpoint.kind == Endpoint::Kind::kUnix) {
    UniqueFd fd = make_socket(AF_UNIX, socket_type);
    const UnixAddress address = unix_address(endpoint);
    error = connect_socket(fd.get(), reinterpret_cast<const sockaddr*>(&address.address),
                           address.length, deadline);
    return error == 0 ? std::move(fd) : UniqueFd();
  }
  const AddrinfoList list = resolve(endpoint, /*passive=*/false);
  error = EADDRNOTAVAIL;
  for (const addrinfo* entry = list.get(); entry != nullptr; entry = entry->ai_next) {
    UniqueFd fd = make_socket(entry->ai_family, SOCK_STREAM);
    error = connect_socket(fd.get(), entry->ai_addr, entry->ai_addrlen, deadline);
    if (error == 0) {
      // Collectives are small request/response exchanges: do not let Nagle hold them back.
      set_option(fd.get(), IPPROTO_TCP, TCP_NODELAY, 1, "setsockopt(TCP_NODELAY)");
      return fd;
    }
  }
  return UniqueFd();
}

UniqueFd connect_with_retry(const Endpoint& endpoint, const Deadline& deadline) {
  auto backoff = std::chrono::milliseconds(10);
  for (;;) {
    int error = 0;
    UniqueFd fd = try_connect(endpoint, SOCK_STREAM, deadline, error);
    if (fd) return fd;
    if (deadline.expired())
      throw Error(Errc::kTimeout, "could not connect to the rendezvous at " + endpoint.to_string() +
                                      " within " + format_seconds(deadline.budget()) + ": " +
                                      std::strerror(error));
    const auto left = deadline.at() - Clock::now();
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, left));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(250));
  }
}

IoStatus send_all(int fd, const void* data, std::size_t size, const Deadline& deadline) {
  auto* bytes = static_cast<const std::byte*>(data);
  while (size > 0) {
    const ssize_t sent = ::send(fd, bytes, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) {
      bytes += sent;
      size -= static_cast<std::size_t>(sent);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_ready(fd, POLLOUT, deadline)) return IoStatus::kTimeout;
    } else if (peer_gone(errno)) {
      return IoStatus::kClosed;
    } else if (errno != EINTR) {
      throw_system_error(errno, "send()");
    }
  }
  return IoStatus::kOk;
}

IoStatus recv_all(int fd, void* data, std::size_t size, const Deadline& deadline) {
  auto* bytes = static_cast<std::byte*>(data);
  while (size > 0) {
    const ssize_t received = ::recv(fd, bytes, size, MSG_DONTWAIT);
    if (received > 0) {
      bytes += received;
      size -= static_cast<std::size_t>(received);
    } else if (received == 0) {
      return IoStatus::kClosed;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_ready(fd, POLLIN, deadline)) return IoStatus::kTimeout;
    } else if (peer_gone(errno)) {
      return IoStatus::kClosed;
    } else if (errno != EINTR) {
      throw_system_error(errno, "recv()");
    }
  }
  return IoStatus::kOk;
}

bool write_all(int fd, const void* data, std::size_t size) {
  auto* bytes = static_cast<const std::byte*>(data);
  while (size > 0) {
    const ssize_t written = ::write(fd, bytes, size);
    if (written > 0) {
      bytes += written;
      size -= static_cast<std::size_t>(written);
    } else if (written < 0 && errno == EPIPE) {
      return false;
    } else if (written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // Someone made our stdout non-blocking: wait for the reader instead of dropping output.
      pollfd entry{fd, POLLOUT, 0};
      if (::poll(&entry, 1, -1) < 0 && errno != EINTR) throw_system_error(errno, "poll()");
    } else if (written < 0 && errno != EINTR) {
      throw_system_error(errno, "write()");
    }
  }
  return true;
}

std::string random_hex(std::size_t bytes) {
  std::string raw(bytes, '\0');
  std::size_t filled = 0;
  while (filled < bytes) {
    const ssize_t got = ::getrandom(raw.data() + filled, bytes - filled, 0);
    if (got > 0)
      filled += static_cast<std::size_t>(got);
    else if (errno != EINTR)
      throw_system_error(errno, "getrandom()");
  }
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * bytes);
  for (const char c : raw) {
    const auto value = static_cast<unsigned char>(c);
    hex += kDigits[value >> 4];
    hex += kDigits[value & 0xf];
  }
  return hex;
}

bool equal_in_constant_time(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  unsigned char difference = 0;
  for (std::size_t i = 0; i < a.size(); ++i) difference |= static_cast<unsigned char>(a[i] ^ b[i]);
  return difference == 0;
}

}  // namespace iris::detail
