// The rendezvous behind connect_bootstrap(): one server, a star of clients, one collective at a
// time.
//
//   rank 0 --\                       each rank sends its contribution to collective #k;
//   rank 1 ---+--> RendezvousServer   once all ranks' are in, the server sends every rank
//   rank 2 --/                        the result (the concatenation, or the root's bytes)
//
// Wire format (both ends are the same build, so integers travel in host byte order; the magic
// number catches a peer that is not an Iris client):
//   frame   = FrameHeader{type, code, length} + `length` payload bytes
//   kHello        client -> server  HelloHeader + secret
//   kWelcome      server -> client  (empty)
//   kContribute   client -> server  ContributionHeader + data (none from non-roots of a broadcast)
//   kResult       server -> client  sequence number (8 bytes) + result
//   kFailure      server -> client  code = iris::Errc, payload = message; the job is over
// A refused hello (wrong secret, wrong world size, a rank taken twice) is a kFailure too.
//
// One server serves any number of bootstraps of the job, one after another or at the same time
// (a job may create several Contexts). Each process numbers the bootstraps it opens at an
// endpoint 1, 2, 3, ... and the server groups the ranks' n-th bootstraps together; so every rank
// must open its bootstraps in the same order, as it creates its Contexts in the same order.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "detail/socket.hpp"
#include "iris/host/bootstrap.hpp"
#include "iris/host/error.hpp"

namespace iris::detail {

namespace rendezvous {

inline constexpr std::uint32_t kMagic = 0x53495249;  // "IRIS" in memory on little-endian hosts
inline constexpr std::uint32_t kProtocolVersion = 1;
/// The largest contribution one rank may make to one collective; the server holds world size
/// times this, so it is kept to what a bootstrap needs.
inline constexpr std::uint64_t kMaxContributionBytes = std::uint64_t{1} << 30;
/// The largest frame accepted before a client has said who it is.
inline constexpr std::uint64_t kMaxHelloBytes = 4096;

enum class MessageType : std::uint32_t {
  kHello = 1,
  kWelcome = 2,
  kContribute = 3,
  kResult = 4,
  kFailure = 5,
};

enum class Collective : std::uint32_t { kAllgather = 1, kBroadcast = 2, kBarrier = 3 };
/// "allgather", "broadcast" or "barrier".
std::string_view to_string(Collective collective) noexcept;
/// "barrier #3", or "barrier #3 of bootstrap 2" past the first bootstrap: how messages name
/// one collective of a job.
std::string describe(Collective collective, std::uint64_t sequence, std::uint64_t instance);

struct FrameHeader {
  std::uint32_t type;
  std::uint32_t code;  ///< kFailure: the iris::Errc; otherwise 0
  std::uint64_t length;
};
static_assert(sizeof(FrameHeader) == 16);

struct HelloHeader {
  std::uint32_t magic;
  std::uint32_t version;
  std::int32_t rank;
  std::int32_t world_size;
  std::uint64_t instance;  ///< 1 for the first bootstrap this process opens at the endpoint, ...
};
static_assert(sizeof(HelloHeader) == 24);

struct ContributionHeader {
  std::uint64_t sequence;  ///< 1 for the first collective of the job
  std::uint32_t collective;
  std::int32_t root;    ///< broadcast only; -1 otherwise
  std::uint64_t bytes;  ///< per rank (allgather) or of the root's data (broadcast)
};
static_assert(sizeof(ContributionHeader) == 24);

/// A frame ready to send: header and payload in one buffer.
std::vector<std::byte> encode_frame(MessageType type, std::uint32_t code,
                                    const std::vector<std::string_view>& payload_parts);

/// The bytes of a trivially copyable value, for encode_frame.
template <class T>
std::string_view bytes_of(const T& value) {
  return {reinterpret_cast<const char*>(&value), sizeof(T)};
}

}  // namespace rendezvous

/// Serves the rendezvous of one job on a background thread: `world_size` ranks presenting
/// `secret`. A collective that has not gathered every rank within `timeout` of its first
/// arrival fails on every rank with iris::Error(kTimeout) naming the missing ranks; a rank that
/// disconnects during a collective fails it on the others with iris::Error(kBootstrap). After
/// a failure every later request of that bootstrap is answered with that failure.
class RendezvousServer {
 public:
  /// Starts listening at `endpoint` (see parse_endpoint; "tcp:host:0" picks a free port) and
  /// serving. Throws iris::Error when the endpoint cannot be bound or the arguments are invalid.
  RendezvousServer(std::string_view endpoint, int world_size, std::string secret,
                   std::chrono::nanoseconds timeout);
  /// Stops and joins the serving thread.
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  /// The endpoint clients connect to (with the port chosen by the kernel for "tcp:host:0").
  const std::string& endpoint() const noexcept { return endpoint_; }

  /// Tells the server that the process of `rank` has exited, `how` in words ("exited with code
  /// 0"): every bootstrap that rank has not joined fails at once on the other ranks
  /// (iris::Error(kBootstrap) "rank 1 exited with code 0 without joining the job's
  /// rendezvous"), now and when opened later, instead of at the timeout. Thread-safe; the
  /// launcher calls it when it reaps a rank.
  void rank_exited(int rank, std::string how);

  /// Stops serving: results not yet delivered get up to a second to drain, then every
  /// connection is closed (clients see the rendezvous close). Idempotent.
  void stop();

 private:
  class Loop;

  std::string endpoint_;
  UniqueFd wake_;     // eventfd: stop() writes it to wake the loop
  UniqueFd notices_;  // eventfd: rank_exited() writes it
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

/// The server this process serves at `endpoint` (rank 0 under torchrun, mpirun or srun),
/// started on first use and kept until the process exits rather than tied to one Bootstrap:
/// the other ranks may open their next bootstrap before this process has closed its previous
/// one. Throws iris::Error(kInvalidArgument) when it already serves `endpoint` for another
/// world size or secret.
std::shared_ptr<RendezvousServer> serve_for_process_lifetime(const std::string& endpoint,
                                                             int world_size,
                                                             const std::string& secret,
                                                             std::chrono::nanoseconds timeout);

/// A rank's connection to a RendezvousServer: the Bootstrap that connect_bootstrap() returns.
class RendezvousClient final : public Bootstrap {
 public:
  /// Connects (retrying until `timeout`, since the server may not be up yet) and introduces
  /// itself; throws iris::Error(kBootstrap) with the server's reason when it is refused.
  RendezvousClient(std::string_view endpoint, int rank, int world_size, const std::string& secret,
                   std::chrono::nanoseconds timeout);
  ~RendezvousClient() override;

  int rank() const noexcept override { return rank_; }
  int world_size() const noexcept override { return world_size_; }
  void allgather(const void* send, void* recv, std::size_t bytes) override;
  void broadcast(void* data, std::size_t bytes, int root) override;
  void barrier() override;

 private:
  // Sends this rank's part of the next collective and waits for the result, which is written
  // to `result` (of exactly `result_bytes` bytes).
  void run(rendezvous::Collective collective, int root, const void* send, std::size_t send_bytes,
           std::size_t declared_bytes, void* result, std::size_t result_bytes);
  void receive_result(const std::string& what, std::uint64_t sequence, void* result,
                      std::size_t result_bytes, const Deadline& deadline);
  [[noreturn]] void fail(Errc code, const std::string& message);

  std::string endpoint_;
  int rank_;
  int world_size_;
  std::chrono::nanoseconds timeout_;
  std::uint64_t instance_ = 0;  // which of this process's bootstraps at the endpoint this is
  UniqueFd socket_;
  std::uint64_t sequence_ = 0;
  std::string failure_;  // set once a collective failed: the connection is unusable after that
  Errc failure_code_ = Errc::kBootstrap;
};

/// "rank 2" or "ranks 2, 3": how messages name a set of ranks.
std::string describe_ranks(const std::vector<int>& ranks);

/// Argument checks shared by every Bootstrap implementation; each throws
/// iris::Error(kInvalidArgument).
void check_rank_and_world(int rank, int world_size);
void check_collective_buffers(const void* send, const void* recv, std::size_t bytes);
void check_root(int root, int world_size);

}  // namespace iris::detail
