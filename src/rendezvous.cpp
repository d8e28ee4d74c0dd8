// RendezvousServer: a poll() loop on one thread that admits ranks and sequences collectives.
#include "detail/rendezvous.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>

#include "detail/log.hpp"
#include "iris/host/error.hpp"

namespace iris::detail {

namespace rendezvous {

std::string_view to_string(Collective collective) noexcept {
  switch (collective) {
    case Collective::kAllgather:
      return "allgather";
    case Collective::kBroadcast:
      return "broadcast";
    case Collective::kBarrier:
      return "barrier";
  }
  return "unknown collective";
}

std::string describe(Collective collective, std::uint64_t sequence, std::uint64_t instance) {
  std::string text = std::string(to_string(collective)) + " #" + std::to_string(sequence);
  if (instance > 1) text += " of bootstrap " + std::to_string(instance);
  return text;
}

std::vector<std::byte> encode_frame(MessageType type, std::uint32_t code,
                                    const std::vector<std::string_view>& payload_parts) {
  std::size_t length = 0;
  for (const std::string_view part : payload_parts) length += part.size();
  const FrameHeader header{static_cast<std::uint32_t>(type), code, length};
  std::vector<std::byte> frame(sizeof header + length);
  std::memcpy(frame.data(), &header, sizeof header);
  std::size_t offset = sizeof header;
  for (const std::string_view part : payload_parts) {
    if (!part.empty()) std::memcpy(frame.data() + offset, part.data(), part.size());
    offset += part.size();
  }
  return frame;
}

}  // namespace rendezvous

std::string describe_ranks(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(ranks[i]);
  }
  return text;
}

namespace {

using namespace rendezvous;
using Frame = std::shared_ptr<const std::vector<std::byte>>;

// How long stop() lets undelivered results drain before closing the connections.
constexpr auto kDrainTime = std::chrono::seconds(1);
// How long the server stops accepting after accept() failed (out of file descriptors).
constexpr auto kAcceptPause = std::chrono::milliseconds(100);

Frame make_frame(MessageType type, std::uint32_t code,
                 const std::vector<std::string_view>& payload_parts) {
  return std::make_shared<const std::vector<std::byte>>(encode_frame(type, code, payload_parts));
}

struct Session;

// One client connection, from accept() to close.
struct Connection {
  UniqueFd fd;
  int rank = -1;               // -1 until its hello was accepted
  Session* session = nullptr;  // the bootstrap it belongs to, once its hello was accepted
  Clock::time_point opened;
  std::vector<std::byte> inbox;
  std::deque<std::pair<Frame, std::size_t>> outbox;  // frames and how much of the first is sent
  bool closing = false;                              // refused: send what is queued, then close
  bool dead = false;  // closed; removed at the end of the loop iteration
};

// The collective being gathered.
struct Gathering {
  std::uint64_t sequence = 0;
  Collective collective = Collective::kBarrier;
  std::int32_t root = -1;
  std::uint64_t bytes = 0;
  int first_rank = -1;
  Clock::time_point started;
  std::vector<std::vector<std::byte>> payloads;  // per rank
  std::vector<bool> arrived;
  int arrived_count = 0;
};

struct Failure {
  Errc code;
  std::string message;
};

// The ranks' n-th bootstraps on this server (every rank opens its bootstraps in the same order):
// a group with its own sequence of collectives and its own failure, so that a job can create
// and destroy contexts one after another, or hold several at once.
struct Session {
  Session(std::uint64_t instance, int world_size)
      : instance(instance),
        by_rank(static_cast<std::size_t>(world_size), nullptr),
        departed(static_cast<std::size_t>(world_size), false) {}

  std::string name(Collective collective, std::uint64_t sequence) const {
    return describe(collective, sequence, instance);
  }

  std::uint64_t instance;
  std::vector<Connection*> by_rank;  // the connection of each rank that has said hello
  std::vector<bool> departed;        // ranks whose connection has closed
  int departed_count = 0;
  std::optional<Gathering> gathering;
  std::uint64_t completed = 0;  // sequence number of the last completed collective
  std::optional<Failure> failure;
};

}  // namespace

class RendezvousServer::Loop {
 public:
  Loop(UniqueFd listener, int wake_fd, int notice_fd, int world_size, std::string secret,
       std::chrono::nanoseconds timeout, std::string endpoint)
      : listener_(std::move(listener)),
        wake_fd_(wake_fd),
        notice_fd_(notice_fd),
        world_size_(world_size),
        secret_(std::move(secret)),
        timeout_(timeout),
        endpoint_(std::move(endpoint)) {}

  // The thread's body. Exceptions end the loop with a log line rather than std::terminate: the
  // clients then see the connection close, which they report.
  // Called from another thread (RendezvousServer::rank_exited); the loop picks it up.
  void post_exit(int rank, std::string how) {
    {
      const std::lock_guard lock(notices_mutex_);
      notices_.emplace_back(rank, std::move(how));
    }
    const std::uint64_t one = 1;
    (void)!::write(notice_fd_, &one, sizeof one);
  }

  void run() noexcept {
    try {
      while (!stopping_ || (has_output() && Clock::now() < drain_until_)) poll_once();
    } catch (const std::exception& error) {
      log(LogLevel::kError, "rendezvous at ", endpoint_, " stopped: ", error.what());
    }
    connections_.clear();
    listener_.reset();
  }

 private:
  void poll_once() {
    std::vector<pollfd> fds;
    fds.push_back({wake_fd_, POLLIN, 0});
    const bool accepting = !stopping_ && Clock::now() >= accept_paused_until_;
    fds.push_back({accepting ? listener_.get() : -1, POLLIN, 0});
    fds.push_back({notice_fd_, POLLIN, 0});
    const std::size_t watched = connections_.size();
    for (const auto& connection : connections_) {
      const short events = static_cast<short>((connection->closing ? 0 : POLLIN) |
                                              (connection->outbox.empty() ? 0 : POLLOUT));
      fds.push_back({connection->fd.get(), events, 0});
    }
    if (::poll(fds.data(), fds.size(), poll_timeout_until(next_timer())) < 0) {
      if (errno == EINTR) return;
      throw_system_error(errno, "poll()");
    }
    if (fds[0].revents != 0) begin_stop();
    if (fds[1].revents & POLLIN) accept_all();
    if (fds[2].revents != 0) take_notices();
    for (std::size_t i = 0; i < watched; ++i) serve(*connections_[i], fds[i + 3].revents);
    check_timers();
    std::erase_if(connections_, [](const auto& connection) { return connection->dead; });
    // A bootstrap that every rank has joined and left is over.
    std::erase_if(sessions_,
                  [&](const auto& entry) { return entry.second.departed_count == world_size_; });
  }

  // Ranks that the launcher saw exit: every bootstrap they have not joined (now or later)
  // fails at once, since they will never come.
  void take_notices() {
    std::uint64_t value = 0;
    (void)!::read(notice_fd_, &value, sizeof value);
    std::vector<std::pair<int, std::string>> notices;
    {
      const std::lock_guard lock(notices_mutex_);
      notices.swap(notices_);
    }
    for (auto& [rank, how] : notices) {
      if (rank < 0 || rank >= world_size_) continue;
      exited_.emplace(rank, std::move(how));
    }
    for (auto& [instance, session] : sessions_) fail_if_an_exited_rank_is_missing(session);
  }

  void fail_if_an_exited_rank_is_missing(Session& session) {
    if (session.failure || stopping_) return;
    for (const auto& [rank, how] : exited_) {
      const auto index = static_cast<std::size_t>(rank);
      if (session.by_rank[index] != nullptr || session.departed[index]) continue;
      std::string what = session.instance > 1
                             ? "bootstrap " + std::to_string(session.instance) + " of the job"
                             : "the job's rendezvous";
      fail_session(session, Errc::kBootstrap,
                   "rank " + std::to_string(rank) + " " + how + " without joining " + what);
      return;
    }
  }

  void begin_stop() {
    std::uint64_t value = 0;
    (void)!::read(wake_fd_, &value, sizeof value);
    if (stopping_) return;
    stopping_ = true;
    drain_until_ = Clock::now() + kDrainTime;
  }

  void accept_all() {
    for (;;) {
      UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!fd) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        // EMFILE and friends: leave the connection in the backlog, and stop polling the
        // listener for a moment rather than spin on it.
        log(LogLevel::kWarn, "rendezvous at ", endpoint_, ": accept(): ", std::strerror(errno));
        accept_paused_until_ = Clock::now() + kAcceptPause;
        return;
      }
      auto connection = std::make_unique<Connection>();
      connection->fd = std::move(fd);
      connection->opened = Clock::now();
      connections_.push_back(std::move(connection));
    }
  }

  void serve(Connection& connection, short revents) {
    if (connection.dead) return;
    if (revents & POLLOUT) flush(connection);
    if (!connection.dead && (revents & (POLLIN | POLLHUP | POLLERR))) {
      if (connection.closing)
        close_connection(connection);
      else
        receive(connection);
    }
  }

  // ------------------------------------------------------------------------------------------
  // Bytes in and out

  void receive(Connection& connection) {
    std::byte buffer[64 * 1024];
    while (!connection.dead && !connection.closing) {
      const ssize_t got = ::recv(connection.fd.get(), buffer, sizeof buffer, MSG_DONTWAIT);
      if (got > 0) {
        // Frames are handled as they complete, so that an oversized one is refused before it
        // is buffered.
        connection.inbox.insert(connection.inbox.end(), buffer, buffer + got);
        handle_frames(connection);
      } else if (got < 0 && errno == EINTR) {
        continue;
      } else if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;
      } else {
        close_connection(connection);  // orderly close, reset, or another error: the peer is gone
      }
    }
  }

  void handle_frames(Connection& connection) {
    std::size_t offset = 0;
    while (!connection.dead && !connection.closing &&
           connection.inbox.size() - offset >= sizeof(FrameHeader)) {
      FrameHeader header;
      std::memcpy(&header, connection.inbox.data() + offset, sizeof header);
      const std::uint64_t limit =
          connection.rank < 0 ? kMaxHelloBytes : sizeof(ContributionHeader) + kMaxContributionBytes;
      if (header.length > limit) {
        protocol_violation(connection, "a message of " + std::to_string(header.length) + " bytes");
        return;
      }
      if (connection.inbox.size() - offset - sizeof header < header.length) break;
      const std::string_view payload(
          reinterpret_cast<const char*>(connection.inbox.data() + offset + sizeof header),
          header.length);
      handle_frame(connection, static_cast<MessageType>(header.type), payload);
      offset += sizeof header + header.length;
    }
    if (!connection.dead)
      connection.inbox.erase(connection.inbox.begin(),
                             connection.inbox.begin() + static_cast<std::ptrdiff_t>(offset));
  }

  void send(Connection& connection, Frame frame) {
    if (connection.dead) return;
    connection.outbox.emplace_back(std::move(frame), 0);
    flush(connection);
  }

  // Highest rank first: under torchrun/MPI rank 0 hosts this server, and may exit as soon as it
  // has its own result, so the others' results must already be in their sockets by then.
  void send_to_session(Session& session, const Frame& frame) {
    for (auto connection = session.by_rank.rbegin(); connection != session.by_rank.rend();
         ++connection)
      if (*connection != nullptr) send(**connection, frame);
  }

  void flush(Connection& connection) {
    while (!connection.outbox.empty()) {
      auto& [frame, sent] = connection.outbox.front();
      const ssize_t wrote = ::send(connection.fd.get(), frame->data() + sent, frame->size() - sent,
                                   MSG_NOSIGNAL | MSG_DONTWAIT);
      if (wrote < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        close_connection(connection);
        return;
      }
      sent += static_cast<std::size_t>(wrote);
      if (sent == frame->size()) connection.outbox.pop_front();
    }
    if (connection.closing) close_connection(connection);
  }

  bool has_output() const {
    for (const auto& connection : connections_)
      if (!connection->dead && !connection->outbox.empty()) return true;
    return false;
  }

  void close_connection(Connection& connection) {
    if (connection.dead) return;
    connection.dead = true;
    connection.fd.reset();
    connection.outbox.clear();
    if (connection.session == nullptr) return;
    Session& session = *connection.session;
    const auto index = static_cast<std::size_t>(connection.rank);
    session.by_rank[index] = nullptr;
    session.departed[index] = true;
    ++session.departed_count;
    log(LogLevel::kDebug, "rendezvous at ", endpoint_, ": rank ", connection.rank,
        " left bootstrap ", session.instance);
    if (session.gathering && !stopping_)
      fail_session(session, Errc::kBootstrap,
                   "rank " + std::to_string(connection.rank) + " disconnected during " +
                       session.name(session.gathering->collective, session.gathering->sequence));
  }

  // ------------------------------------------------------------------------------------------
  // Messages

  void handle_frame(Connection& connection, MessageType type, std::string_view payload) {
    if (type == MessageType::kHello && connection.session == nullptr) {
      handle_hello(connection, payload);
    } else if (type == MessageType::kContribute && connection.session != nullptr) {
      handle_contribution(connection, payload);
    } else {
      protocol_violation(connection, "an unexpected message (type " +
                                         std::to_string(static_cast<std::uint32_t>(type)) + ")");
    }
  }

  void handle_hello(Connection& connection, std::string_view payload) {
    HelloHeader hello{};
    if (payload.size() >= sizeof hello) std::memcpy(&hello, payload.data(), sizeof hello);
    if (payload.size() < sizeof hello || hello.magic != kMagic) {
      log(LogLevel::kWarn, "rendezvous at ", endpoint_,
          ": dropped a connection that is not an Iris client");
      close_connection(connection);
      return;
    }
    std::optional<Failure> refusal = check_job(hello, payload.substr(sizeof hello));
    Session* session = nullptr;
    if (!refusal) {
      session = &sessions_.try_emplace(hello.instance, hello.instance, world_size_).first->second;
      refusal = check_rank(*session, hello.rank);
    }
    if (refusal) {
      log(LogLevel::kWarn, "rendezvous at ", endpoint_,
          ": refused a connection: ", refusal->message);
      // Kept for the timeout message: "rank 1 connected but was refused: ..." says more than
      // "never connected".
      if (hello.rank >= 0 && hello.rank < world_size_) refused_[hello.rank] = refusal->message;
      send(connection, make_frame(MessageType::kFailure, static_cast<std::uint32_t>(refusal->code),
                                  {refusal->message}));
      connection.closing = true;
      if (connection.outbox.empty()) close_connection(connection);
      return;
    }
    connection.rank = hello.rank;
    connection.session = session;
    session->by_rank[static_cast<std::size_t>(hello.rank)] = &connection;
    log(LogLevel::kDebug, "rendezvous at ", endpoint_, ": rank ", hello.rank, " joined bootstrap ",
        hello.instance);
    send(connection, make_frame(MessageType::kWelcome, 0, {}));
    fail_if_an_exited_rank_is_missing(*session);
  }

  // Whether a hello belongs to this job at all.
  std::optional<Failure> check_job(const HelloHeader& hello, std::string_view secret) const {
    const auto refuse = [](std::string message) {
      return Failure{Errc::kBootstrap, std::move(message)};
    };
    const std::string rank = "rank " + std::to_string(hello.rank);
    if (hello.version != kProtocolVersion)
      return refuse(rank + " speaks rendezvous protocol version " + std::to_string(hello.version) +
                    ", this rendezvous speaks version " + std::to_string(kProtocolVersion) +
                    " (are two Iris versions mixed in one job?)");
    if (!equal_in_constant_time(secret, secret_))
      return refuse("wrong job secret: the rendezvous at " + endpoint_ + " serves another job");
    if (hello.world_size != world_size_)
      return refuse(rank + " says world size " + std::to_string(hello.world_size) +
                    ", the job has " + std::to_string(world_size_));
    if (hello.rank < 0 || hello.rank >= world_size_)
      return refuse(rank + " is out of range: the job has ranks 0 to " +
                    std::to_string(world_size_ - 1));
    if (hello.instance == 0) return refuse(rank + " sent bootstrap number 0");
    return std::nullopt;
  }

  // Whether `rank` may join `session`.
  static std::optional<Failure> check_rank(const Session& session, int rank) {
    if (session.failure) return session.failure;
    const auto index = static_cast<std::size_t>(rank);
    const std::string who = "rank " + std::to_string(rank);
    if (session.by_rank[index] != nullptr)
      return Failure{Errc::kBootstrap,
                     who + " is already connected (do two processes claim the same rank?)"};
    if (session.departed[index])
      return Failure{Errc::kBootstrap, who + " already left the job; it cannot join again"};
    return std::nullopt;
  }

  void handle_contribution(Connection& connection, std::string_view payload) {
    Session& session = *connection.session;
    if (session.failure) return;  // this rank has been sent the failure already
    ContributionHeader header{};
    if (payload.size() < sizeof header) {
      protocol_violation(connection, "a truncated contribution");
      return;
    }
    std::memcpy(&header, payload.data(), sizeof header);
    const std::string_view data = payload.substr(sizeof header);
    if (auto problem = check_contribution(session, connection.rank, header, data)) {
      fail_session(session, problem->code, problem->message);
      return;
    }
    if (!session.gathering) {
      if (auto departed = first_departed(session)) {
        fail_session(session, Errc::kBootstrap,
                     "rank " + std::to_string(*departed) + " disconnected before " +
                         session.name(static_cast<Collective>(header.collective), header.sequence));
        return;
      }
      start_gathering(session, connection.rank, header);
    } else if (auto mismatch = compare_with_first(session, connection.rank, header)) {
      fail_session(session, Errc::kMismatch, *mismatch);
      return;
    }
    add_contribution(session, connection.rank, data);
  }

  // Checks a contribution on its own: sequence, kind and size. These only fail for a client
  // that does not follow the protocol, which is a bug rather than a user error.
  std::optional<Failure> check_contribution(const Session& session, int rank,
                                            const ContributionHeader& header,
                                            std::string_view data) const {
    const auto internal = [](std::string message) {
      return Failure{Errc::kInternal, std::move(message)};
    };
    const std::string who = "rank " + std::to_string(rank);
    const std::uint64_t expected = session.completed + 1;
    if (header.sequence != expected)
      return internal(who + " sent collective #" + std::to_string(header.sequence) +
                      " while the job is at #" + std::to_string(expected));
    const auto collective = static_cast<Collective>(header.collective);
    std::uint64_t expected_data = 0;
    switch (collective) {
      case Collective::kAllgather:
        expected_data = header.bytes;
        break;
      case Collective::kBroadcast:
        expected_data = header.root == rank ? header.bytes : 0;
        break;
      case Collective::kBarrier:
        break;
      default:
        return internal(who + " sent an unknown collective " + std::to_string(header.collective));
    }
    if (data.size() != expected_data || header.bytes > kMaxContributionBytes)
      return internal(who + " sent " + std::to_string(data.size()) + " bytes for " +
                      session.name(collective, header.sequence) + ", which declares " +
                      std::to_string(header.bytes));
    if (session.gathering && session.gathering->arrived[static_cast<std::size_t>(rank)])
      return internal(who + " contributed twice to " + session.name(collective, header.sequence));
    return std::nullopt;
  }

  static std::optional<std::string> compare_with_first(const Session& session, int rank,
                                                       const ContributionHeader& header) {
    const Gathering& first = *session.gathering;
    const std::string who = "rank " + std::to_string(rank);
    const std::string other = "rank " + std::to_string(first.first_rank);
    const auto collective = static_cast<Collective>(header.collective);
    if (collective != first.collective) {
      std::string text = "collective #" + std::to_string(header.sequence);
      if (session.instance > 1) text += " of bootstrap " + std::to_string(session.instance);
      return text + ": " + who + " called " + std::string(to_string(collective)) + " but " + other +
             " called " + std::string(to_string(first.collective));
    }
    const std::string what = session.name(collective, header.sequence) + ": ";
    if (header.root != first.root)
      return what + who + " names root " + std::to_string(header.root) + " but " + other +
             " names root " + std::to_string(first.root);
    if (header.bytes != first.bytes)
      return what + who + " passes " + std::to_string(header.bytes) + " bytes but " + other +
             " passes " + std::to_string(first.bytes);
    return std::nullopt;
  }

  std::optional<int> first_departed(const Session& session) const {
    for (int rank = 0; rank < world_size_; ++rank)
      if (session.departed[static_cast<std::size_t>(rank)]) return rank;
    return std::nullopt;
  }

  void start_gathering(Session& session, int rank, const ContributionHeader& header) {
    Gathering& gathering = session.gathering.emplace();
    gathering.sequence = header.sequence;
    gathering.collective = static_cast<Collective>(header.collective);
    gathering.root = header.root;
    gathering.bytes = header.bytes;
    gathering.first_rank = rank;
    gathering.started = Clock::now();
    gathering.payloads.resize(static_cast<std::size_t>(world_size_));
    gathering.arrived.assign(static_cast<std::size_t>(world_size_), false);
  }

  void add_contribution(Session& session, int rank, std::string_view data) {
    Gathering& gathering = *session.gathering;
    const auto index = static_cast<std::size_t>(rank);
    const auto* bytes = reinterpret_cast<const std::byte*>(data.data());
    gathering.payloads[index].assign(bytes, bytes + data.size());
    gathering.arrived[index] = true;
    if (++gathering.arrived_count == world_size_) complete(session);
  }

  void complete(Session& session) {
    const Gathering& gathering = *session.gathering;
    std::vector<std::string_view> parts;
    parts.push_back(bytes_of(gathering.sequence));
    const auto as_view = [](const std::vector<std::byte>& bytes) {
      return std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    };
    if (gathering.collective == Collective::kAllgather)
      for (const auto& payload : gathering.payloads) parts.push_back(as_view(payload));
    else if (gathering.collective == Collective::kBroadcast)
      parts.push_back(as_view(gathering.payloads[static_cast<std::size_t>(gathering.root)]));
    const Frame result = make_frame(MessageType::kResult, 0, parts);
    session.completed = gathering.sequence;
    session.gathering.reset();
    send_to_session(session, result);
  }

  // ------------------------------------------------------------------------------------------
  // Failures and timers

  void fail_session(Session& session, Errc code, const std::string& message) {
    if (session.failure) return;
    session.failure = Failure{code, message};
    session.gathering.reset();
    log(LogLevel::kError, "rendezvous at ", endpoint_, ": ", message);
    send_to_session(session,
                    make_frame(MessageType::kFailure, static_cast<std::uint32_t>(code), {message}));
  }

  void protocol_violation(Connection& connection, const std::string& what) {
    const std::string who =
        connection.rank < 0 ? "a connection" : "rank " + std::to_string(connection.rank);
    log(connection.rank < 0 ? LogLevel::kWarn : LogLevel::kError, "rendezvous at ", endpoint_, ": ",
        who, " sent ", what, "; dropping it");
    if (connection.session != nullptr)
      fail_session(*connection.session, Errc::kInternal,
                   who + " broke the rendezvous protocol: it sent " + what);
    close_connection(connection);
  }

  Clock::time_point next_timer() const {
    Clock::time_point next = Clock::time_point::max();
    if (stopping_)
      next = drain_until_;
    else if (accept_paused_until_ > Clock::now())
      next = accept_paused_until_;
    for (const auto& [instance, session] : sessions_)
      if (session.gathering) next = std::min(next, session.gathering->started + timeout_);
    for (const auto& connection : connections_)
      if (connection->session == nullptr && !connection->dead)
        next = std::min(next, connection->opened + timeout_);
    return next;
  }

  void check_timers() {
    const auto now = Clock::now();
    for (auto& [instance, session] : sessions_)
      if (session.gathering && now >= session.gathering->started + timeout_)
        fail_session(session, Errc::kTimeout, missing_ranks_message(session));
    // A connection that never says hello (a port scanner, a stuck client) is not kept forever.
    for (const auto& connection : connections_)
      if (connection->session == nullptr && !connection->dead &&
          now >= connection->opened + timeout_)
        close_connection(*connection);
  }

  std::string missing_ranks_message(const Session& session) const {
    std::vector<int> missing;
    std::vector<int> never_connected;
    for (int rank = 0; rank < world_size_; ++rank) {
      const auto index = static_cast<std::size_t>(rank);
      if (session.gathering->arrived[index]) continue;
      missing.push_back(rank);
      if (session.by_rank[index] == nullptr && !session.departed[index])
        never_connected.push_back(rank);
    }
    std::string message = session.name(session.gathering->collective, session.gathering->sequence) +
                          ": " + describe_ranks(missing) + " did not arrive within " +
                          format_seconds(timeout_);
    std::vector<int> silent;
    for (const int rank : never_connected) {
      if (const auto refused = refused_.find(rank); refused != refused_.end())
        message += " (rank " + std::to_string(rank) +
                   " connected but was refused: " + refused->second + ")";
      else
        silent.push_back(rank);
    }
    if (!silent.empty())
      message += " (" + describe_ranks(silent) + " never connected to the rendezvous)";
    return message;
  }

  UniqueFd listener_;
  const int wake_fd_;
  const int notice_fd_;
  const int world_size_;
  const std::string secret_;
  const std::chrono::nanoseconds timeout_;
  const std::string endpoint_;

  std::vector<std::unique_ptr<Connection>> connections_;
  std::map<std::uint64_t, Session> sessions_;  // by bootstrap number
  std::map<int, std::string> refused_;         // the last refusal of a hello claiming a rank
  std::map<int, std::string> exited_;          // ranks the launcher saw exit, and how
  std::mutex notices_mutex_;
  std::vector<std::pair<int, std::string>> notices_;  // posted by rank_exited()
  bool stopping_ = false;
  Clock::time_point drain_until_;
  Clock::time_point accept_paused_until_;
};

RendezvousServer::RendezvousServer(std::string_view endpoint, int world_size, std::string secret,
                                   std::chrono::nanoseconds timeout) {
  if (world_size < 1)
    throw Error(Errc::kInvalidArgument,
                "rendezvous world size must be at least 1, not " + std::to_string(world_size));
  if (timeout <= std::chrono::nanoseconds::zero())
    throw Error(Errc::kInvalidArgument, "rendezvous timeout must be positive");
  const Endpoint requested = parse_endpoint(endpoint);
  UniqueFd listener = listen_at(requested, SOCK_STREAM, SOMAXCONN);
  endpoint_ = bound_endpoint(listener.get(), requested).to_string();
  wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_) throw_system_error(errno, "eventfd()");
  notices_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!notices_) throw_system_error(errno, "eventfd()");
  loop_ = std::make_unique<Loop>(std::move(listener), wake_.get(), notices_.get(), world_size,
                                 std::move(secret), timeout, endpoint_);
  thread_ = std::thread([loop = loop_.get()] { loop->run(); });
  log(LogLevel::kDebug, "rendezvous serving ", world_size, " ranks at ", endpoint_);
}

RendezvousServer::~RendezvousServer() {
  stop();
}

void RendezvousServer::rank_exited(int rank, std::string how) {
  if (thread_.joinable()) loop_->post_exit(rank, std::move(how));
}

void RendezvousServer::stop() {
  if (!thread_.joinable()) return;
  const std::uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
  thread_.join();
  const Endpoint bound = parse_endpoint(endpoint_);
  if (bound.kind == Endpoint::Kind::kUnix && !bound.address.starts_with('@'))
    ::unlink(bound.address.c_str());
}

}  // namespace iris::detail
