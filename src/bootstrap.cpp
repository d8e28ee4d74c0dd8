// The Bootstrap defaults, FunctionBootstrap, the single-rank bootstrap and the choice of a
// bootstrap from the environment.
#include "iris/host/bootstrap.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>

#include "detail/log.hpp"
#include "detail/rendezvous.hpp"
#include "iris/host/env.hpp"
#include "iris/host/error.hpp"

namespace iris {

namespace detail {

void check_rank_and_world(int rank, int world_size) {
  if (world_size < 1)
    throw Error(Errc::kInvalidArgument,
                "world size must be at least 1, not " + std::to_string(world_size));
  if (rank < 0 || rank >= world_size)
    throw Error(Errc::kInvalidArgument, "rank " + std::to_string(rank) +
                                            " is out of range for world size " +
                                            std::to_string(world_size));
}

void check_collective_buffers(const void* send, const void* recv, std::size_t bytes) {
  if (bytes > 0 && (send == nullptr || recv == nullptr))
    throw Error(Errc::kInvalidArgument,
                std::string("null ") + (send == nullptr ? "send" : "receive") +
                    " buffer for a collective of " + std::to_string(bytes) + " bytes");
}

void check_root(int root, int world_size) {
  if (root < 0 || root >= world_size)
    throw Error(Errc::kInvalidArgument, "broadcast root " + std::to_string(root) +
                                            " is out of range for world size " +
                                            std::to_string(world_size));
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Collectives built on allgather

void Bootstrap::broadcast(void* data, std::size_t bytes, int root) {
  detail::check_root(root, world_size());
  detail::check_collective_buffers(data, data, bytes);
  std::vector<std::byte> gathered(bytes * static_cast<std::size_t>(world_size()));
  allgather(data, gathered.data(), bytes);
  if (rank() != root && bytes > 0)
    std::memcpy(data, gathered.data() + static_cast<std::size_t>(root) * bytes, bytes);
}

void Bootstrap::barrier() {
  const std::byte token{};
  std::vector<std::byte> tokens(static_cast<std::size_t>(world_size()));
  allgather(&token, tokens.data(), 1);
}

FunctionBootstrap::FunctionBootstrap(int rank, int world_size, AllgatherFn allgather)
    : rank_(rank), world_size_(world_size), allgather_(std::move(allgather)) {
  detail::check_rank_and_world(rank, world_size);
  if (!allgather_)
    throw Error(Errc::kInvalidArgument, "FunctionBootstrap needs an allgather function");
}

void FunctionBootstrap::allgather(const void* send, void* recv, std::size_t bytes) {
  detail::check_collective_buffers(send, recv, bytes);
  allgather_(send, recv, bytes);
}

namespace {

class SingleRankBootstrap final : public Bootstrap {
 public:
  int rank() const noexcept override { return 0; }
  int world_size() const noexcept override { return 1; }
  void allgather(const void* send, void* recv, std::size_t bytes) override {
    detail::check_collective_buffers(send, recv, bytes);
    if (bytes > 0) std::memmove(recv, send, bytes);
  }
};

}  // namespace

std::unique_ptr<Bootstrap> make_single_rank_bootstrap() {
  return std::make_unique<SingleRankBootstrap>();
}

std::unique_ptr<Bootstrap> connect_bootstrap(const std::string& endpoint, int rank, int world_size,
                                             const std::string& secret,
                                             std::chrono::nanoseconds timeout) {
  return std::make_unique<detail::RendezvousClient>(endpoint, rank, world_size, secret, timeout);
}

// ---------------------------------------------------------------------------------------------
// bootstrap_from_env

namespace {

constexpr auto kDefaultBootstrapTimeout = std::chrono::seconds(120);
constexpr long long kDefaultBootstrapPort = 29600;

// A rank and world size handed to us by a launcher other than iris-run.
struct LauncherRank {
  const char* launcher;
  int rank;
  int world_size;
};

int int_from_env(const char* name, const std::string& value) {
  const long long parsed = env::parse_int(value, name);
  if (parsed < 0 || parsed > std::numeric_limits<int>::max())
    throw Error(Errc::kInvalidArgument, std::string(name) + "=" + value + " is out of range");
  return static_cast<int>(parsed);
}

int required_int(const char* name, const char* why) {
  const auto value = env::get(name);
  if (!value) throw Error(Errc::kInvalidArgument, std::string(name) + " is not set, but " + why);
  return int_from_env(name, *value);
}

std::optional<LauncherRank> launcher_rank() {
  struct Convention {
    const char* launcher;
    const char* rank;
    const char* size;
  };
  static constexpr std::array<Convention, 3> kConventions{{
      {"torchrun", "RANK", "WORLD_SIZE"},
      {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
      {"PMI", "PMI_RANK", "PMI_SIZE"},
  }};
  for (const Convention& convention : kConventions) {
    const auto rank = env::get(convention.rank);
    const auto size = env::get(convention.size);
    if (rank && size)
      return LauncherRank{convention.launcher, int_from_env(convention.rank, *rank),
                          int_from_env(convention.size, *size)};
  }
  return std::nullopt;
}

// Where rank 0 serves the rendezvous for ranks that torchrun/mpirun/srun started.
std::string rank0_endpoint() {
  if (auto endpoint = env::get(env::kBootstrap)) return *endpoint;
  const std::string host = env::get("MASTER_ADDR").value_or("127.0.0.1");
  long long port = kDefaultBootstrapPort;
  if (env::get(env::kBootstrapPort))
    port = env::get_int(env::kBootstrapPort, port);
  else if (env::get("MASTER_PORT"))
    port = env::get_int("MASTER_PORT", 0) + 1;
  if (port < 1 || port > 65535)
    throw Error(Errc::kInvalidArgument, "rendezvous port " + std::to_string(port) +
                                            " (from IRIS_BOOTSTRAP_PORT or MASTER_PORT + 1) is not "
                                            "a TCP port");
  const bool v6 = host.find(':') != std::string::npos;
  return "tcp:" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

// IRIS_JOB_SECRET, or text that every rank of this job sees alike and that differs between
// jobs: the launcher's job id (torchrun's default id "none" is no id), and the address and port
// of torchrun's store, which two jobs running at once cannot share. The world size and the
// restart count are part of it too, so that a restarted job never meets its previous life.
std::string job_secret(const LauncherRank& launched) {
  if (auto secret = env::get(env::kJobSecret)) return *secret;
  std::string secret =
      std::string(launched.launcher) + "|world " + std::to_string(launched.world_size);
  bool tells_jobs_apart = false;
  for (const char* name : {"TORCHELASTIC_RUN_ID", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE",
                           "SLURM_JOB_ID", "MASTER_PORT"}) {
    const auto value = env::get(name);
    if (!value || (std::string_view(name) == "TORCHELASTIC_RUN_ID" && *value == "none")) continue;
    secret += std::string("|") + name + "=" + *value;
    tells_jobs_apart = true;
  }
  for (const char* name : {"MASTER_ADDR", "SLURM_STEP_ID", "TORCHELASTIC_RESTART_COUNT"})
    if (const auto value = env::get(name)) secret += std::string("|") + name + "=" + *value;
  if (!tells_jobs_apart)
    log(detail::LogLevel::kWarn,
        "no IRIS_JOB_SECRET and nothing that tells this job from another (a job id in "
        "TORCHELASTIC_RUN_ID, OMPI_MCA_ess_base_jobid, PMIX_NAMESPACE or SLURM_JOB_ID, or "
        "MASTER_PORT): another job using the same rendezvous port could join this one. Set "
        "IRIS_JOB_SECRET to the same value on every rank of the job");
  return secret;
}

std::unique_ptr<Bootstrap> serve_and_connect(const LauncherRank& launched,
                                             std::chrono::nanoseconds timeout) {
  const std::string endpoint = rank0_endpoint();
  const std::string secret = job_secret(launched);
  log(detail::LogLevel::kInfo, launched.launcher, " rank ", launched.rank, " of ",
      launched.world_size, ": rendezvous at ", endpoint, ", served by rank 0");
  if (launched.rank != 0)
    return connect_bootstrap(endpoint, launched.rank, launched.world_size, secret, timeout);
  // Rank 0 serves for the rest of its life: see serve_for_process_lifetime.
  const auto server =
      detail::serve_for_process_lifetime(endpoint, launched.world_size, secret, timeout);
  return connect_bootstrap(server->endpoint(), 0, launched.world_size, secret, timeout);
}

}  // namespace

std::unique_ptr<Bootstrap> bootstrap_from_env() {
  // Every variable is checked first: a half-set launcher environment (a rank without its world
  // size, IRIS_RANK without IRIS_BOOTSTRAP) is refused instead of running as one rank.
  env::check_environment();
  const auto timeout = env::get_seconds(env::kBootstrapTimeout, kDefaultBootstrapTimeout);
  const auto endpoint = env::get(env::kBootstrap);
  if (endpoint && env::get(env::kRank)) {
    const char* why = "IRIS_BOOTSTRAP and IRIS_RANK are (iris-run sets all three)";
    const int rank = required_int(env::kRank, why);
    const int world_size = required_int(env::kWorldSize, why);
    return connect_bootstrap(*endpoint, rank, world_size, env::get(env::kJobSecret).value_or(""),
                             timeout);
  }
  if (const auto launched = launcher_rank()) {
    detail::check_rank_and_world(launched->rank, launched->world_size);
    if (launched->world_size == 1) return make_single_rank_bootstrap();
    return serve_and_connect(*launched, timeout);
  }
  return make_single_rank_bootstrap();
}

// ---------------------------------------------------------------------------------------------
// ranks_on_this_host

namespace {

// Text that is equal on two ranks exactly when they share a kernel boot and a network
// namespace: abstract Unix socket names are per network namespace, and the namespace's inode
// number is unique for the life of a boot. The host name stands in where /proc is not readable.
std::string host_identity() {
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  char network_namespace[128] = {};
  const ssize_t length =
      ::readlink("/proc/self/ns/net", network_namespace, sizeof network_namespace - 1);
  if (!boot_id.empty() && length > 0) return boot_id + "|" + network_namespace;
  char hostname[256] = {};
  ::gethostname(hostname, sizeof hostname - 1);
  return std::string("host ") + hostname;
}

}  // namespace

std::vector<int> ranks_on_this_host(Bootstrap& bootstrap) {
  constexpr std::size_t kRecordBytes = 512;
  std::string mine = host_identity();
  mine.resize(kRecordBytes, '\0');
  const auto world_size = static_cast<std::size_t>(bootstrap.world_size());
  std::string all(kRecordBytes * world_size, '\0');
  bootstrap.allgather(mine.data(), all.data(), kRecordBytes);
  std::vector<int> ranks;
  for (std::size_t rank = 0; rank < world_size; ++rank)
    if (std::string_view(all).substr(rank * kRecordBytes, kRecordBytes) == mine)
      ranks.push_back(static_cast<int>(rank));
  return ranks;
}

}  // namespace iris
