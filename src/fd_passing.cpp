#include "detail/fd_passing.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>

#include "detail/log.hpp"
#include "detail/rendezvous.hpp"
#include "iris/host/error.hpp"

namespace iris::detail {
namespace {

constexpr std::size_t kNonceBytes = 16;
constexpr std::size_t kTokenHexDigits = 32;
// How long to wait before connecting again to a peer whose listen backlog was full.
constexpr auto kBacklogRetry = std::chrono::milliseconds(5);

// What every rank tells the others through the bootstrap.
struct Offer {
  char socket_name[48];  // "@iris-fd-<nonce>", NUL-terminated; empty for a rank alone on its host
  char token[kTokenHexDigits];
  std::uint64_t local_ranks_hash;
};

// What a peer sends to fetch a rank's fd, and what comes back with the fd attached.
struct Request {
  char token[kTokenHexDigits];
  std::int32_t rank;
};
struct Reply {
  std::int32_t rank;
};

std::uint64_t hash_ranks(const std::vector<int>& ranks) {
  std::uint64_t hash = 14695981039346656037ull;  // FNV-1a
  for (const int rank : ranks) {
    hash ^= static_cast<std::uint64_t>(static_cast<std::uint32_t>(rank));
    hash *= 1099511628211ull;
  }
  return hash;
}

void check_arguments(const Bootstrap& bootstrap, int my_fd, const std::vector<int>& local_ranks,
                     std::chrono::nanoseconds timeout) {
  const auto invalid = [](const std::string& message) {
    throw Error(Errc::kInvalidArgument, "exchange_fds: " + message);
  };
  if (::fcntl(my_fd, F_GETFD) < 0)
    invalid("fd " + std::to_string(my_fd) + " is not an open file descriptor");
  if (timeout <= std::chrono::nanoseconds::zero()) invalid("the timeout must be positive");
  for (std::size_t i = 0; i < local_ranks.size(); ++i) {
    if (local_ranks[i] < 0 || local_ranks[i] >= bootstrap.world_size())
      invalid("local rank " + std::to_string(local_ranks[i]) + " is out of range for world size " +
              std::to_string(bootstrap.world_size()));
    if (i > 0 && local_ranks[i] <= local_ranks[i - 1])
      invalid("local_ranks must be sorted and without repeats");
  }
  if (!std::binary_search(local_ranks.begin(), local_ranks.end(), bootstrap.rank()))
    invalid("local_ranks must include this rank (" + std::to_string(bootstrap.rank()) + ")");
}

// The exchange after the allgather: serve our fd to every peer, fetch every peer's, all in one
// poll() loop so that no pair of ranks can wait on each other.
class Exchange {
 public:
  Exchange(int rank, int my_fd, std::vector<int> peers, const std::vector<Offer>& offers,
           std::string token, UniqueFd listener, Deadline deadline)
      : rank_(rank),
        my_fd_(my_fd),
        peers_(std::move(peers)),
        offers_(offers),
        token_(std::move(token)),
        listener_(std::move(listener)),
        deadline_(deadline),
        received_(offers.size()) {
    for (const int peer : peers_) fetches_.push_back(Fetch{peer, UniqueFd(), false, Clock::now()});
  }

  std::vector<UniqueFd> run() {
    while (fetched_ < peers_.size() || served_.size() < peers_.size()) {
      if (deadline_.expired()) throw Error(Errc::kTimeout, timeout_message());
      connect_pending();
      poll_once();
    }
    return std::move(received_);
  }

 private:
  struct Fetch {
    int peer;
    UniqueFd socket;  // open from connect() until the fd has arrived
    bool requested;
    Clock::time_point retry_at;
  };

  void connect_pending() {
    const auto now = Clock::now();
    for (Fetch& fetch : fetches_) {
      if (fetch.socket || received_[static_cast<std::size_t>(fetch.peer)] || now < fetch.retry_at)
        continue;
      const Offer& offer = offers_[static_cast<std::size_t>(fetch.peer)];
      const Endpoint endpoint{
          Endpoint::Kind::kUnix,
          std::string(offer.socket_name, strnlen(offer.socket_name, sizeof offer.socket_name)), 0};
      int error = 0;
      fetch.socket = try_connect(endpoint, SOCK_SEQPACKET, deadline_, error);
      if (fetch.socket) continue;
      if (error == EAGAIN) {
        fetch.retry_at = now + kBacklogRetry;
      } else {
        // The peer listens before the allgather and until it is done: it must have died.
        throw Error(Errc::kBootstrap, "rank " + std::to_string(fetch.peer) +
                                          " does not serve its file descriptor (" +
                                          std::strerror(error) + "): did it exit?");
      }
    }
  }

  void poll_once() {
    std::vector<pollfd> fds{{listener_.get(), POLLIN, 0}};
    for (const UniqueFd& socket : serving_) fds.push_back({socket.get(), POLLIN, 0});
    for (const Fetch& fetch : fetches_)
      fds.push_back(
          {fetch.socket.get(), static_cast<short>(fetch.requested ? POLLIN : POLLOUT), 0});
    Clock::time_point wake = deadline_.at();
    for (const Fetch& fetch : fetches_)
      if (!fetch.socket && !received_[static_cast<std::size_t>(fetch.peer)])
        wake = std::min(wake, fetch.retry_at);
    if (::poll(fds.data(), fds.size(), poll_timeout_until(wake)) < 0) {
      if (errno == EINTR) return;
      throw_system_error(errno, "poll()");
    }
    // Sockets accepted or closed below are not in `fds`: handle the fetches and the accepted
    // connections first, then accept new ones.
    const std::size_t serving_count = serving_.size();
    for (std::size_t i = 0; i < fetches_.size(); ++i)
      if (fds[1 + serving_count + i].revents != 0) progress(fetches_[i]);
    for (std::size_t i = 0; i < serving_count; ++i)
      if (fds[1 + i].revents != 0) serve(serving_[i]);
    std::erase_if(serving_, [](const UniqueFd& socket) { return !socket; });
    if (fds[0].revents & POLLIN) accept_all();
  }

  void accept_all() {
    for (;;) {
      UniqueFd socket(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (socket) {
        serving_.push_back(std::move(socket));
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return;
      } else if (errno != EINTR && errno != ECONNABORTED) {
        throw_system_error(errno, "accept4()");
      }
    }
  }

  // Answers one request for our fd; closes the connection either way.
  void serve(UniqueFd& socket) {
    Request request{};
    const ssize_t got = ::recv(socket.get(), &request, sizeof request, MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
    const std::string_view presented(request.token, kTokenHexDigits);
    const bool valid = got == sizeof request && equal_in_constant_time(presented, token_) &&
                       std::binary_search(peers_.begin(), peers_.end(), request.rank);
    if (got > 0 && !valid) {
      log(LogLevel::kWarn,
          "fd exchange: refused a request without this job's token or from a rank not on this "
          "host");
    } else if (valid && !served_.contains(request.rank)) {
      if (send_fd(socket.get(), Reply{rank_})) served_.insert(request.rank);
    }
    socket.reset();
  }

  bool send_fd(int socket, const Reply& reply) {
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    iovec payload{const_cast<Reply*>(&reply), sizeof reply};
    msghdr message{};
    message.msg_iov = &payload;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(header), &my_fd_, sizeof(int));
    for (;;) {
      if (::sendmsg(socket, &message, MSG_NOSIGNAL | MSG_DONTWAIT) == sizeof reply) return true;
      if (errno == EINTR) continue;
      // The requester is gone: it will not count as served, and the timeout will name it.
      if (errno == EPIPE || errno == ECONNRESET) return false;
      throw_system_error(errno, "sendmsg(SCM_RIGHTS)");
    }
  }

  void progress(Fetch& fetch) {
    if (!fetch.requested) {
      Request request{};
      std::memcpy(request.token, offers_[static_cast<std::size_t>(fetch.peer)].token,
                  kTokenHexDigits);
      request.rank = rank_;
      const ssize_t sent =
          ::send(fetch.socket.get(), &request, sizeof request, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (sent == sizeof request)
        fetch.requested = true;
      else if (sent < 0 && errno != EAGAIN && errno != EINTR)
        peer_vanished(fetch.peer, errno);
      return;
    }
    receive_fd(fetch);
  }

  void receive_fd(Fetch& fetch) {
    Reply reply{};
    iovec payload{&reply, sizeof reply};
    // Room for more than one fd, so that a peer that sent several cannot make us leak them.
    alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))] = {};
    msghdr message{};
    message.msg_iov = &payload;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    const ssize_t got = ::recvmsg(fetch.socket.get(), &message, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (got < 0) peer_vanished(fetch.peer, errno);
    std::vector<UniqueFd> fds = take_fds(message);
    if (got == 0) peer_vanished(fetch.peer, ECONNRESET);
    if (message.msg_flags & MSG_CTRUNC)
      throw Error(Errc::kSystem,
                  "the file descriptor from rank " + std::to_string(fetch.peer) +
                      " was dropped by the kernel: is the open-file limit (ulimit -n) reached?");
    if (got != sizeof reply || reply.rank != fetch.peer || fds.size() != 1)
      throw Error(Errc::kInternal, "rank " + std::to_string(fetch.peer) +
                                       " answered the fd exchange with a malformed message");
    received_[static_cast<std::size_t>(fetch.peer)] = std::move(fds.front());
    ++fetched_;
    fetch.socket.reset();
  }

  static std::vector<UniqueFd> take_fds(msghdr& message) {
    std::vector<UniqueFd> fds;
    for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr;
         header = CMSG_NXTHDR(&message, header)) {
      if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
      const std::size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < count; ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof fd);
        fds.emplace_back(fd);
      }
    }
    return fds;
  }

  [[noreturn]] void peer_vanished(int peer, int error) {
    throw Error(Errc::kBootstrap,
                "rank " + std::to_string(peer) +
                    " closed the fd exchange before sending its file descriptor (" +
                    std::strerror(error) + "): did it exit?");
  }

  std::string timeout_message() const {
    std::vector<int> not_received;
    std::vector<int> not_served;
    for (const int peer : peers_) {
      if (!received_[static_cast<std::size_t>(peer)]) not_received.push_back(peer);
      if (!served_.contains(peer)) not_served.push_back(peer);
    }
    std::string message = "fd exchange of rank " + std::to_string(rank_) +
                          " did not finish within " + format_seconds(deadline_.budget());
    if (!not_received.empty())
      message += ": no file descriptor from " + describe_ranks(not_received);
    if (!not_served.empty())
      message += std::string(not_received.empty() ? ": " : "; ") + describe_ranks(not_served) +
                 " did not fetch this rank's";
    return message;
  }

  const int rank_;
  const int my_fd_;
  const std::vector<int> peers_;
  const std::vector<Offer>& offers_;
  const std::string token_;
  UniqueFd listener_;
  const Deadline deadline_;
  std::vector<UniqueFd> received_;  // indexed by rank
  std::size_t fetched_ = 0;
  std::vector<Fetch> fetches_;
  std::vector<UniqueFd> serving_;  // accepted connections that have not asked yet
  std::set<int> served_;           // peers that have our fd
};

}  // namespace

std::vector<UniqueFd> exchange_fds(Bootstrap& bootstrap, int my_fd,
                                   const std::vector<int>& local_ranks,
                                   std::chrono::nanoseconds timeout) {
  check_arguments(bootstrap, my_fd, local_ranks, timeout);
  const int rank = bootstrap.rank();
  std::vector<int> peers;
  std::copy_if(local_ranks.begin(), local_ranks.end(), std::back_inserter(peers),
               [rank](int r) { return r != rank; });

  Offer mine{};
  mine.local_ranks_hash = hash_ranks(local_ranks);
  UniqueFd listener;
  const std::string token = random_hex(kTokenHexDigits / 2);
  if (!peers.empty()) {
    const std::string name = "@iris-fd-" + random_hex(kNonceBytes);
    listener = listen_at(Endpoint{Endpoint::Kind::kUnix, name, 0}, SOCK_SEQPACKET,
                         static_cast<int>(peers.size()));
    std::memcpy(mine.socket_name, name.data(), name.size());
    std::memcpy(mine.token, token.data(), kTokenHexDigits);
  }
  std::vector<Offer> offers(static_cast<std::size_t>(bootstrap.world_size()));
  bootstrap.allgather(&mine, offers.data(), sizeof mine);

  for (const int peer : peers)
    if (offers[static_cast<std::size_t>(peer)].local_ranks_hash != mine.local_ranks_hash)
      throw Error(Errc::kMismatch, "exchange_fds: rank " + std::to_string(peer) +
                                       " lists other ranks on this host than rank " +
                                       std::to_string(rank) + " (" + describe_ranks(local_ranks) +
                                       ")");
  std::vector<UniqueFd> received(offers.size());
  if (peers.empty()) return received;
  Exchange exchange(rank, my_fd, peers, offers, token, std::move(listener), Deadline(timeout));
  received = exchange.run();
  log(LogLevel::kDebug, "fd exchange: received the fds of ", describe_ranks(peers));
  return received;
}

}  // namespace iris::detail
