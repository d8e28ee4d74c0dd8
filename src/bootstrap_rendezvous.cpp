// RendezvousClient: one rank's side of the rendezvous protocol (see detail/rendezvous.hpp).
#include <pthread.h>

#include <cstring>
#include <map>
#include <mutex>

#include "detail/log.hpp"
#include "detail/rendezvous.hpp"
#include "iris/host/error.hpp"

namespace iris::detail {
namespace {

using namespace rendezvous;

// The server reports a timeout `timeout` after the first rank arrived, which may be a little
// after this rank's own clock started; waiting this much longer lets its message, which names
// the missing ranks, arrive before this rank gives up on its own.
constexpr auto kServerAnswerGrace = std::chrono::seconds(2);
// Failure messages are a line of text; anything longer is not from an Iris server.
constexpr std::uint64_t kMaxMessageBytes = 64 * 1024;

// What this process keeps across its bootstraps: how many it has opened at each endpoint, and
// the servers it serves for its whole life. A forked child is another process: it starts from
// nothing, and leaves its parent's servers alone (their threads do not exist in the child, and
// stopping them would wake the parent's through the shared eventfd).
class ProcessRendezvousState {
 public:
  static ProcessRendezvousState& get() {
    static ProcessRendezvousState state;
    return state;
  }

  std::uint64_t next_instance(const std::string& endpoint) {
    const std::lock_guard lock(mutex_);
    return ++opened_[endpoint];
  }

  std::shared_ptr<RendezvousServer> server(const std::string& endpoint, int world_size,
                                           const std::string& secret,
                                           std::chrono::nanoseconds timeout) {
    const std::lock_guard lock(mutex_);
    auto [entry, created] = servers_.try_emplace(endpoint);
    if (created) {
      try {
        entry->second =
            Served{std::make_shared<RendezvousServer>(endpoint, world_size, secret, timeout),
                   world_size, secret};
      } catch (...) {
        servers_.erase(entry);
        throw;
      }
    } else if (entry->second.world_size != world_size || entry->second.secret != secret) {
      throw Error(Errc::kInvalidArgument, "this process already serves the rendezvous at " +
                                              endpoint + " for another job (world size " +
                                              std::to_string(entry->second.world_size) + ")");
    }
    return entry->second.server;
  }

 private:
  struct Served {
    std::shared_ptr<RendezvousServer> server;
    int world_size;
    std::string secret;
  };

  ProcessRendezvousState() {
    ::pthread_atfork([] { get().mutex_.lock(); }, [] { get().mutex_.unlock(); },
                     [] { get().forget_parent(); });
  }

  void forget_parent() {  // in the child of fork(), with mutex_ held by the forking thread
    opened_.clear();
    (void)new std::map<std::string, Served>(std::move(servers_));  // leaked on purpose
    servers_.clear();
    mutex_.unlock();
  }

  std::mutex mutex_;
  std::map<std::string, std::uint64_t> opened_;
  std::map<std::string, Served> servers_;
};

Errc errc_from_wire(std::uint32_t code) {
  return code <= static_cast<std::uint32_t>(Errc::kInternal) ? static_cast<Errc>(code)
                                                             : Errc::kBootstrap;
}

}  // namespace

RendezvousClient::RendezvousClient(std::string_view endpoint, int rank, int world_size,
                                   const std::string& secret, std::chrono::nanoseconds timeout)
    : endpoint_(endpoint), rank_(rank), world_size_(world_size), timeout_(timeout) {
  check_rank_and_world(rank, world_size);
  if (timeout <= std::chrono::nanoseconds::zero())
    throw Error(Errc::kInvalidArgument, "bootstrap timeout must be positive");
  const Endpoint parsed = parse_endpoint(endpoint);
  endpoint_ = parsed.to_string();
  const Deadline deadline(timeout);
  socket_ = connect_with_retry(parsed, deadline);

  instance_ = ProcessRendezvousState::get().next_instance(endpoint_);
  const HelloHeader hello{kMagic, kProtocolVersion, rank, world_size, instance_};
  const auto frame = encode_frame(MessageType::kHello, 0, {bytes_of(hello), secret});
  const std::string what = "the hello of rank " + std::to_string(rank);
  if (send_all(socket_.get(), frame.data(), frame.size(), deadline) != IoStatus::kOk)
    fail(Errc::kBootstrap,
         "the rendezvous at " + endpoint_ + " closed the connection during " + what);
  // The answer to the hello comes at once from an Iris server, so it is bounded by what is
  // left of `timeout` (a silent program on the port must not stretch it).
  receive_result(what, 0, nullptr, 0, deadline);
  log(LogLevel::kDebug, "joined the rendezvous at ", endpoint_, " as rank ", rank, " of ",
      world_size);
}

RendezvousClient::~RendezvousClient() = default;

std::shared_ptr<RendezvousServer> serve_for_process_lifetime(const std::string& endpoint,
                                                             int world_size,
                                                             const std::string& secret,
                                                             std::chrono::nanoseconds timeout) {
  return ProcessRendezvousState::get().server(endpoint, world_size, secret, timeout);
}

void RendezvousClient::allgather(const void* send, void* recv, std::size_t bytes) {
  check_collective_buffers(send, recv, bytes);
  run(Collective::kAllgather, -1, send, bytes, bytes, recv,
      bytes * static_cast<std::size_t>(world_size_));
}

void RendezvousClient::broadcast(void* data, std::size_t bytes, int root) {
  check_root(root, world_size_);
  check_collective_buffers(data, data, bytes);
  const bool is_root = root == rank_;
  run(Collective::kBroadcast, root, is_root ? data : nullptr, is_root ? bytes : 0, bytes, data,
      bytes);
}

void RendezvousClient::barrier() {
  run(Collective::kBarrier, -1, nullptr, 0, 0, nullptr, 0);
}

void RendezvousClient::run(Collective collective, int root, const void* send,
                           std::size_t send_bytes, std::size_t declared_bytes, void* result,
                           std::size_t result_bytes) {
  if (declared_bytes > kMaxContributionBytes)
    throw Error(Errc::kInvalidArgument, std::string(to_string(collective)) + " of " +
                                            std::to_string(declared_bytes) +
                                            " bytes per rank: the bootstrap carries at most " +
                                            std::to_string(kMaxContributionBytes));
  if (!failure_.empty())
    throw Error(failure_code_,
                failure_ + " (reported by an earlier collective; the bootstrap is unusable)");
  const std::uint64_t sequence = ++sequence_;
  const std::string what = describe(collective, sequence, instance_);
  const ContributionHeader header{sequence, static_cast<std::uint32_t>(collective), root,
                                  declared_bytes};
  const auto frame = encode_frame(
      MessageType::kContribute, 0,
      {bytes_of(header), std::string_view(static_cast<const char*>(send), send_bytes)});
  switch (send_all(socket_.get(), frame.data(), frame.size(), Deadline(timeout_))) {
    case IoStatus::kOk:
      break;
    case IoStatus::kClosed:
      fail(Errc::kBootstrap,
           "the rendezvous at " + endpoint_ + " closed the connection during " + what);
    case IoStatus::kTimeout:
      fail(Errc::kTimeout, "the rendezvous at " + endpoint_ + " did not take " + what + " within " +
                               format_seconds(timeout_));
  }
  receive_result(what, sequence, result, result_bytes, Deadline(timeout_ + kServerAnswerGrace));
}

// Waits for the answer to the hello (sequence 0: a kWelcome) or to a collective (a kResult).
void RendezvousClient::receive_result(const std::string& what, std::uint64_t sequence, void* result,
                                      std::size_t result_bytes, const Deadline& deadline) {
  // Before the welcome, whatever answers may be another program that listens on the port.
  const std::string foreign =
      "the program listening at " + endpoint_ +
      " is not an Iris rendezvous (is another job or service using that port? choose another "
      "with IRIS_BOOTSTRAP_PORT or IRIS_BOOTSTRAP)";
  const auto check = [&](IoStatus status) {
    if (sequence == 0 && status == IoStatus::kTimeout)
      fail(Errc::kTimeout, "no answer to " + what + " from " + endpoint_ + " within " +
                               format_seconds(deadline.budget()) + ": " + foreign);
    if (status == IoStatus::kClosed)
      fail(Errc::kBootstrap, "the rendezvous at " + endpoint_ + " closed the connection during " +
                                 what + " (did the launcher or rank 0 stop?)");
    if (status == IoStatus::kTimeout)
      fail(Errc::kTimeout, "no answer from the rendezvous at " + endpoint_ + " for " + what +
                               " within " + format_seconds(deadline.budget()));
  };
  FrameHeader header{};
  check(recv_all(socket_.get(), &header, sizeof header, deadline));
  const auto type = static_cast<MessageType>(header.type);
  const bool known = header.type >= static_cast<std::uint32_t>(MessageType::kHello) &&
                     header.type <= static_cast<std::uint32_t>(MessageType::kFailure);
  if (sequence == 0 && (!known || header.length > kMaxMessageBytes ||
                        (type != MessageType::kWelcome && type != MessageType::kFailure)))
    fail(Errc::kBootstrap, foreign);
  if (type == MessageType::kFailure && header.length <= kMaxMessageBytes) {
    std::string message(header.length, '\0');
    check(recv_all(socket_.get(), message.data(), message.size(), deadline));
    fail(errc_from_wire(header.code), message);
  }
  if (sequence == 0 && type == MessageType::kWelcome && header.length == 0) return;
  if (type != MessageType::kResult || header.length != sizeof(std::uint64_t) + result_bytes)
    fail(Errc::kInternal, "the rendezvous at " + endpoint_ + " answered " + what +
                              " with a malformed message (type " + std::to_string(header.type) +
                              ", " + std::to_string(header.length) + " bytes)");
  std::uint64_t answered = 0;
  check(recv_all(socket_.get(), &answered, sizeof answered, deadline));
  if (answered != sequence)
    fail(Errc::kInternal, "the rendezvous at " + endpoint_ + " answered collective #" +
                              std::to_string(answered) + " to " + what);
  check(recv_all(socket_.get(), result, result_bytes, deadline));
}

void RendezvousClient::fail(Errc code, const std::string& message) {
  failure_ = message;
  failure_code_ = code;
  throw Error(code, message);
}

}  // namespace iris::detail
