// The bootstrap: the rendezvous server and its clients in real processes, FunctionBootstrap,
// the single-rank bootstrap, and the choice of bootstrap from the environment.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>

#include <poll.h>
#include <vector>

#include "detail/rendezvous.hpp"
#include "detail/socket.hpp"
#include "iris/host/bootstrap.hpp"
#include "iris/host/error.hpp"
#include "unit/helpers/forked_ranks.hpp"
#include "unit/helpers/scoped_env.hpp"

namespace {

using namespace std::chrono_literals;
using iris::Errc;
using iris::Error;
using iris::detail::RendezvousServer;
using iris::test::require;
using iris::test::run_forked;
using testing::HasSubstr;

const std::string kSecret = "test-secret";

std::string fresh_unix_endpoint() {
  return "unix:@iris-bootstrap-test-" + iris::detail::random_hex(8);
}

// Runs `call` and returns the iris::Error it throws (failing the test when it throws none).
template <class Call>
Error error_of(Call&& call) {
  try {
    call();
  } catch (const Error& error) {
    return error;
  }
  ADD_FAILURE() << "expected an iris::Error";
  return Error(Errc::kInternal, "no error was thrown");
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Rank r's contribution to round `round`: bytes that differ by rank, round and position.
std::vector<unsigned char> pattern(int rank, int round, std::size_t bytes) {
  std::vector<unsigned char> data(bytes);
  for (std::size_t i = 0; i < bytes; ++i)
    data[i] = static_cast<unsigned char>(rank * 31 + round * 7 + i);
  return data;
}

// The collectives a rank runs in the happy-path tests: allgather, broadcast from every root,
// barrier, and a large allgather that needs many partial reads and writes.
void exercise_collectives(iris::Bootstrap& bootstrap, int rounds) {
  const int rank = bootstrap.rank();
  const int world = bootstrap.world_size();
  for (int round = 0; round < rounds; ++round) {
    const std::size_t bytes = 1 + static_cast<std::size_t>(round % 5) * 13;
    const auto mine = pattern(rank, round, bytes);
    std::vector<unsigned char> all(bytes * static_cast<std::size_t>(world));
    bootstrap.allgather(mine.data(), all.data(), bytes);
    for (int r = 0; r < world; ++r)
      require(std::equal(all.begin() + r * bytes, all.begin() + (r + 1) * bytes,
                         pattern(r, round, bytes).begin()),
              "allgather round " + std::to_string(round) + ": wrong bytes from rank " +
                  std::to_string(r));

    const int root = round % world;
    auto data = rank == root ? pattern(root, round, bytes) : std::vector<unsigned char>(bytes, 0);
    bootstrap.broadcast(data.data(), bytes, root);
    require(data == pattern(root, round, bytes), "broadcast round " + std::to_string(round));
    bootstrap.barrier();
  }
  constexpr std::size_t kLarge = 3 << 20;
  const auto mine = pattern(rank, 99, kLarge);
  std::vector<unsigned char> all(kLarge * static_cast<std::size_t>(world));
  bootstrap.allgather(mine.data(), all.data(), kLarge);
  for (int r = 0; r < world; ++r)
    require(std::equal(all.begin() + r * kLarge, all.begin() + (r + 1) * kLarge,
                       pattern(r, 99, kLarge).begin()),
            "large allgather: wrong bytes from rank " + std::to_string(r));
  bootstrap.allgather(nullptr, nullptr, 0);
}

// ---------------------------------------------------------------------------------------------
// The rendezvous with real processes

TEST(Rendezvous, CollectivesOverManyRoundsInFourProcesses) {
  const std::string endpoint = fresh_unix_endpoint();
  // The server comes up after the ranks have started: they retry until it is there.
  std::unique_ptr<RendezvousServer> server;
  std::thread start_server([&] {
    std::this_thread::sleep_for(200ms);
    server = std::make_unique<RendezvousServer>(endpoint, 4, kSecret, 20s);
  });
  const auto outcomes = run_forked(4, [&](int rank) {
    auto bootstrap = iris::connect_bootstrap(endpoint, rank, 4, kSecret, 20s);
    require(bootstrap->rank() == rank && bootstrap->world_size() == 4, "rank and world size");
    exercise_collectives(*bootstrap, 40);
  });
  start_server.join();
  for (const auto& outcome : outcomes) EXPECT_TRUE(outcome.succeeded()) << outcome;
}

TEST(Rendezvous, TcpOnLoopbackWithAKernelChosenPort) {
  RendezvousServer server("tcp:127.0.0.1:0", 3, kSecret, 20s);
  ASSERT_THAT(server.endpoint(), testing::StartsWith("tcp:127.0.0.1:"));
  EXPECT_NE(server.endpoint(), "tcp:127.0.0.1:0");
  const auto outcomes = run_forked(3, [&](int rank) {
    auto bootstrap = iris::connect_bootstrap(server.endpoint(), rank, 3, kSecret, 20s);
    exercise_collectives(*bootstrap, 10);
  });
  for (const auto& outcome : outcomes) EXPECT_TRUE(outcome.succeeded()) << outcome;
}

TEST(Rendezvous, TimeoutNamesTheRanksThatDidNotArrive) {
  RendezvousServer server(fresh_unix_endpoint(), 4, kSecret, 1s);
  const auto start = std::chrono::steady_clock::now();
  // Ranks 2 and 3 never start.
  const auto outcomes = run_forked(2, [&](int rank) {
    auto bootstrap = iris::connect_bootstrap(server.endpoint(), rank, 4, kSecret, 1s);
    bootstrap->barrier();
  });
  EXPECT_LT(seconds_since(start), 10.0);
  for (const auto& outcome : outcomes) {
    EXPECT_TRUE(outcome.threw(Errc::kTimeout)) << outcome;
    EXPECT_THAT(outcome.message, HasSubstr("barrier #1: ranks 2, 3 did not arrive within 1 s"))
        << outcome;
    EXPECT_THAT(outcome.message, HasSubstr("never connected")) << outcome;
  }
}

TEST(Rendezvous, ARankThatDiesDuringACollectiveFailsItOnTheOthers) {
  RendezvousServer server(fresh_unix_endpoint(), 3, kSecret, 30s);
  const auto start = std::chrono::steady_clock::now();
  const auto outcomes = run_forked(3, [&](int rank) {
    auto bootstrap = iris::connect_bootstrap(server.endpoint(), rank, 3, kSecret, 30s);
    bootstrap->barrier();
    if (rank == 2) {
      std::this_thread::sleep_for(200ms);  // the others are waiting in the allgather by now
      ::_exit(9);                          // dies without a word
    }
    int value = rank;
    std::vector<int> all(3);
    bootstrap->allgather(&value, all.data(), sizeof value);
  });
  EXPECT_LT(seconds_since(start), 10.0);
  EXPECT_EQ(outcomes[2].exit_code, 9) << outcomes[2];
  for (int rank : {0, 1}) {
    EXPECT_TRUE(outcomes[rank].threw(Errc::kBootstrap)) << outcomes[rank];
    EXPECT_THAT(outcomes[rank].message, HasSubstr("rank 2 disconnected during allgather #2"))
        << outcomes[rank];
  }
}

TEST(Rendezvous, ARankThatLeftIsReportedAtTheNextCollective) {
  RendezvousServer server(fresh_unix_endpoint(), 2, kSecret, 30s);
  const auto outcomes = run_forked(2, [&](int rank) {
    auto bootstrap = iris::connect_bootstrap(server.endpoint(), rank, 2, kSecret, 30s);
    bootstrap->barrier();
    if (rank == 1) return;  // leaves the job early
    std::this_thread::sleep_for(300ms);
    bootstrap->barrier();
  });
  EXPECT_TRUE(outcomes[1].succeeded()) << outcomes[1];
  EXPECT_TRUE(outcomes[0].threw(Errc::kBootstrap)) << outcomes[0];
  EXPECT_THAT(outcomes[0].message, HasSubstr("rank 1 disconnected before barrier #2"))
      << outcomes[0];
}

TEST(Rendezvous, ServesSeveralBootstrapsOfOneJob) {
  // As a job that creates Contexts one after another, or holds two at once.
  RendezvousServer server(fresh_unix_endpoint(), 3, kSecret, 20s);
  const auto outcomes = run_forked(3, [&](int rank) {
    auto first = iris::connect_bootstrap(server.endpoint(), rank, 3, kSecret, 20s);
    exercise_collectives(*first, 3);
    auto second = iris::connect_bootstrap(server.endpoint(), rank, 3, kSecret, 20s);
    second->barrier();
    first->barrier();
    exercise_collectives(*second, 3);
    first.reset();
    auto third = iris::connect_bootstrap(server.endpoint(), rank, 3, kSecret, 20s);
    exercise_collectives(*third, 3);
    second->barrier();
  });
  for (const auto& outcome : outcomes) EXPECT_TRUE(outcome.succeeded()) << outcome;
}

TEST(Rendezvous, AFailedBootstrapLeavesTheOthersWorking) {
  RendezvousServer server(fresh_unix_endpoint(), 2, kSecret, 20s);
  const auto outcomes = run_forked(2, [&](int rank) {
    auto first = iris::connect_bootstrap(server.endpoint(), rank, 2, kSecret, 20s);
    auto second = iris::connect_bootstrap(server.endpoint(), rank, 2, kSecret, 20s);
    if (rank == 0)
      second->barrier();
    else
      second->broadcast(&rank, sizeof rank, 0);
  });
  for (const auto& outcome : outcomes) {
    EXPECT_TRUE(outcome.threw(Errc::kMismatch)) << outcome;
    EXPECT_THAT(outcome.message, HasSubstr("collective #1 of bootstrap 2")) << outcome;
  }
  const auto again = run_forked(2, [&](int rank) {
    // New processes: their first bootstrap is a fresh group, unaffected by the failed one.
    auto bootstrap = iris::connect_bootstrap(server.endpoint(), rank, 2, kSecret, 20s);
    exercise_collectives(*bootstrap, 2);
  });
  for (const auto& outcome : again) EXPECT_TRUE(outcome.succeeded()) << outcome;
}

TEST(Rendezvous, DifferentByteCountsAreAMismatch) {
  RendezvousServer server(fresh_unix_endpoint(), 2, kSecret, 30s);
  const auto outcomes = run_forked(2, [&](int rank) {
    auto bootstrap = iris::connect_bootstrap(server.endpoint(), rank, 2, kSecret, 30s);
    const std::size_t bytes = rank == 0 ? 8 : 16;
    std::vector<char> send(bytes), recv(2 * bytes);
    bootstrap->allgather(send.data(), recv.data(), bytes);
  });
  for (const auto& outcome : outcomes) {
    EXPECT_TRUE(outcome.threw(Errc::kMismatch)) << outcome;
    // Whichever rank arrived first is the reference; the message names both sizes.
    EXPECT_THAT(outcome.message,
                testing::ContainsRegex("allgather #1: rank [01] passes (8|16) bytes but "
                                       "rank [01] passes (8|16)"))
        << outcome;
  }
}

TEST(Rendezvous, DifferentCollectivesAreAMismatch) {
  RendezvousServer server(fresh_unix_endpoint(), 2, kSecret, 30s);
  const auto outcomes = run_forked(2, [&](int rank) {
    auto bootstrap = iris::connect_bootstrap(server.endpoint(), rank, 2, kSecret, 30s);
    if (rank == 0) {
      bootstrap->barrier();
    } else {
      char value = 1, all[2];
      bootstrap->allgather(&value, all, 1);
    }
  });
  for (const auto& outcome : outcomes) {
    EXPECT_TRUE(outcome.threw(Errc::kMismatch)) << outcome;
    EXPECT_THAT(outcome.message, HasSubstr("collective #1: rank")) << outcome;
  }
}

TEST(Rendezvous, ABroadcastWithDifferentRootsIsAMismatch) {
  RendezvousServer server(fresh_unix_endpoint(), 2, kSecret, 30s);
  const auto outcomes = run_forked(2, [&](int rank) {
    auto bootstrap = iris::connect_bootstrap(server.endpoint(), rank, 2, kSecret, 30s);
    int value = rank;
    bootstrap->broadcast(&value, sizeof value, rank);
  });
  for (const auto& outcome : outcomes) {
    EXPECT_TRUE(outcome.threw(Errc::kMismatch)) << outcome;
    EXPECT_THAT(outcome.message, HasSubstr("names root")) << outcome;
  }
}

// ---------------------------------------------------------------------------------------------
// Refused connections (the clients are in this process, the server on its thread)

TEST(Rendezvous, RefusesAWrongSecret) {
  RendezvousServer server(fresh_unix_endpoint(), 2, kSecret, 10s);
  const Error error =
      error_of([&] { iris::connect_bootstrap(server.endpoint(), 0, 2, "guess", 5s); });
  EXPECT_EQ(error.code(), Errc::kBootstrap);
  EXPECT_THAT(error.message(), HasSubstr("wrong job secret"));
}

TEST(Rendezvous, RefusesAWrongWorldSize) {
  RendezvousServer server(fresh_unix_endpoint(), 2, kSecret, 10s);
  const Error error =
      error_of([&] { iris::connect_bootstrap(server.endpoint(), 3, 4, kSecret, 5s); });
  EXPECT_EQ(error.code(), Errc::kBootstrap);
  EXPECT_THAT(error.message(), HasSubstr("rank 3 says world size 4, the job has 2"));
}

TEST(Rendezvous, RefusesARankClaimedByTwoProcesses) {
  RendezvousServer server(fresh_unix_endpoint(), 2, kSecret, 10s);
  const auto outcomes = run_forked(2, [&](int) {
    auto bootstrap = iris::connect_bootstrap(server.endpoint(), 1, 2, kSecret, 5s);
    std::this_thread::sleep_for(500ms);  // still connected when the other process says hello
  });
  const int refused = outcomes[0].succeeded() ? 1 : 0;
  EXPECT_TRUE(outcomes[1 - refused].succeeded()) << outcomes[1 - refused];
  EXPECT_TRUE(outcomes[refused].threw(Errc::kBootstrap)) << outcomes[refused];
  EXPECT_THAT(outcomes[refused].message, HasSubstr("rank 1 is already connected"))
      << outcomes[refused];
}

TEST(Rendezvous, RefusesSomethingThatIsNotAnIrisClient) {
  RendezvousServer server(fresh_unix_endpoint(), 1, kSecret, 10s);
  const auto endpoint = iris::detail::parse_endpoint(server.endpoint());
  iris::detail::Deadline deadline(5s);
  auto socket = iris::detail::connect_with_retry(endpoint, deadline);
  const char junk[64] = "GET / HTTP/1.0\r\n\r\n";
  ASSERT_EQ(iris::detail::send_all(socket.get(), junk, sizeof junk, deadline),
            iris::detail::IoStatus::kOk);
  char byte = 0;
  EXPECT_EQ(iris::detail::recv_all(socket.get(), &byte, 1, deadline),
            iris::detail::IoStatus::kClosed);
  // The server is unharmed.
  auto bootstrap = iris::connect_bootstrap(server.endpoint(), 0, 1, kSecret, 5s);
  bootstrap->barrier();
}

TEST(Rendezvous, ARankArrivingAfterAFailureIsToldWhy) {
  RendezvousServer server(fresh_unix_endpoint(), 2, kSecret, 500ms);
  auto early = iris::connect_bootstrap(server.endpoint(), 0, 2, kSecret, 500ms);
  EXPECT_EQ(error_of([&] { early->barrier(); }).code(), Errc::kTimeout);
  const auto late =
      run_forked(1, [&](int) { iris::connect_bootstrap(server.endpoint(), 1, 2, kSecret, 5s); });
  EXPECT_TRUE(late[0].threw(Errc::kTimeout)) << late[0];
  EXPECT_THAT(late[0].message, HasSubstr("rank 1 did not arrive within 0.5 s")) << late[0];
  // The failed client stays failed.
  EXPECT_THAT(error_of([&] { early->barrier(); }).message(), HasSubstr("earlier collective"));
}

TEST(Rendezvous, StoppingTheServerReleasesWaitingRanks) {
  auto server = std::make_unique<RendezvousServer>(fresh_unix_endpoint(), 2, kSecret, 30s);
  auto bootstrap = iris::connect_bootstrap(server->endpoint(), 0, 2, kSecret, 30s);
  std::thread stopper([&] {
    std::this_thread::sleep_for(200ms);
    server->stop();
  });
  const auto start = std::chrono::steady_clock::now();
  const Error error = error_of([&] { bootstrap->barrier(); });
  stopper.join();
  EXPECT_LT(seconds_since(start), 5.0);
  EXPECT_EQ(error.code(), Errc::kBootstrap);
  EXPECT_THAT(error.message(), HasSubstr("closed the connection during barrier #1"));
}

TEST(Rendezvous, ConnectingGivesUpAtTheTimeout) {
  const auto start = std::chrono::steady_clock::now();
  const Error error =
      error_of([] { iris::connect_bootstrap(fresh_unix_endpoint(), 0, 2, kSecret, 300ms); });
  EXPECT_EQ(error.code(), Errc::kTimeout);
  EXPECT_THAT(error.message(), HasSubstr("within 0.3 s"));
  EXPECT_LT(seconds_since(start), 5.0);
}

TEST(Rendezvous, ServerRejectsBadArguments) {
  EXPECT_EQ(error_of([] { RendezvousServer(fresh_unix_endpoint(), 0, kSecret, 1s); }).code(),
            Errc::kInvalidArgument);
  EXPECT_EQ(error_of([] { RendezvousServer(fresh_unix_endpoint(), 2, kSecret, 0s); }).code(),
            Errc::kInvalidArgument);
  EXPECT_EQ(error_of([] { RendezvousServer("http://example.com", 2, kSecret, 1s); }).code(),
            Errc::kInvalidArgument);
  RendezvousServer server(fresh_unix_endpoint(), 1, kSecret, 1s);
  const Error taken = error_of([&] { RendezvousServer(server.endpoint(), 1, kSecret, 1s); });
  EXPECT_EQ(taken.code(), Errc::kSystem);
  EXPECT_THAT(taken.message(), HasSubstr("Address already in use"));
}

TEST(Rendezvous, ClientRejectsBadArguments) {
  RendezvousServer server(fresh_unix_endpoint(), 2, kSecret, 10s);
  for (const auto& [rank, world] : {std::pair{2, 2}, std::pair{-1, 2}, std::pair{0, 0}})
    EXPECT_EQ(error_of([&] {
                iris::connect_bootstrap(server.endpoint(), rank, world, kSecret, 1s);
              }).code(),
              Errc::kInvalidArgument);
  EXPECT_EQ(error_of([] { iris::connect_bootstrap("tcp:localhost", 0, 1, kSecret, 1s); }).code(),
            Errc::kInvalidArgument);
  auto bootstrap = iris::connect_bootstrap(server.endpoint(), 0, 2, kSecret, 10s);
  int value = 0;
  EXPECT_EQ(error_of([&] { bootstrap->allgather(nullptr, &value, 4); }).code(),
            Errc::kInvalidArgument);
  EXPECT_EQ(error_of([&] { bootstrap->allgather(&value, nullptr, 4); }).code(),
            Errc::kInvalidArgument);
  EXPECT_EQ(error_of([&] { bootstrap->broadcast(&value, 4, 2); }).code(), Errc::kInvalidArgument);
}

TEST(Endpoint, ParsesEveryForm) {
  using iris::detail::Endpoint;
  using iris::detail::parse_endpoint;
  EXPECT_EQ(parse_endpoint("unix:@abstract").address, "@abstract");
  EXPECT_EQ(parse_endpoint("unix:/tmp/socket").address, "/tmp/socket");
  const Endpoint tcp = parse_endpoint("tcp:node7:29600");
  EXPECT_EQ(tcp.kind, Endpoint::Kind::kTcp);
  EXPECT_EQ(tcp.address, "node7");
  EXPECT_EQ(tcp.port, 29600);
  const Endpoint v6 = parse_endpoint("tcp:[::1]:80");
  EXPECT_EQ(v6.address, "::1");
  EXPECT_EQ(v6.to_string(), "tcp:[::1]:80");
  EXPECT_EQ(parse_endpoint("tcp::5").address, "127.0.0.1");
  for (const char* bad : {"", "unix:", "unix:@", "tcp:host", "tcp:host:99999", "tcp:host:x",
                          "tcp:[::1]80", "udp:x:1"}) {
    const Error error = error_of([&] { parse_endpoint(bad); });
    EXPECT_EQ(error.code(), Errc::kInvalidArgument) << bad;
    EXPECT_THAT(error.message(), HasSubstr("expected unix:@name")) << bad;
  }
}

TEST(Rendezvous, PathSocketIsRemovedAtStop) {
  const std::string path =
      testing::TempDir() + "iris-rendezvous-" + iris::detail::random_hex(4) + ".sock";
  {
    RendezvousServer server("unix:" + path, 1, kSecret, 5s);
    EXPECT_EQ(::access(path.c_str(), F_OK), 0);
    iris::connect_bootstrap(server.endpoint(), 0, 1, kSecret, 5s)->barrier();
  }
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
}

// ---------------------------------------------------------------------------------------------
// FunctionBootstrap and the single-rank bootstrap

TEST(FunctionBootstrap, BuildsBroadcastAndBarrierOnAllgather) {
  // Rank 1 of 3; the "other ranks" contribute their rank number in every byte.
  int calls = 0;
  iris::FunctionBootstrap bootstrap(1, 3, [&](const void* send, void* recv, std::size_t bytes) {
    ++calls;
    auto* out = static_cast<unsigned char*>(recv);
    for (int r = 0; r < 3; ++r) std::memset(out + r * bytes, r, bytes);
    std::memcpy(out + bytes, send, bytes);
  });
  EXPECT_EQ(bootstrap.rank(), 1);
  EXPECT_EQ(bootstrap.world_size(), 3);
  unsigned char data[4] = {9, 9, 9, 9};
  bootstrap.broadcast(data, sizeof data, 2);
  EXPECT_EQ(std::vector<unsigned char>(data, data + 4), std::vector<unsigned char>(4, 2));
  bootstrap.broadcast(data, sizeof data, 1);  // from itself: unchanged
  EXPECT_EQ(std::vector<unsigned char>(data, data + 4), std::vector<unsigned char>(4, 2));
  bootstrap.barrier();
  EXPECT_EQ(calls, 3);
}

TEST(FunctionBootstrap, RejectsBadArguments) {
  const auto noop = [](const void*, void*, std::size_t) {};
  EXPECT_EQ(error_of([&] { iris::FunctionBootstrap(3, 3, noop); }).code(), Errc::kInvalidArgument);
  EXPECT_EQ(error_of([&] { iris::FunctionBootstrap(-1, 3, noop); }).code(), Errc::kInvalidArgument);
  EXPECT_EQ(error_of([&] { iris::FunctionBootstrap(0, 0, noop); }).code(), Errc::kInvalidArgument);
  EXPECT_EQ(error_of([&] { iris::FunctionBootstrap(0, 1, nullptr); }).code(),
            Errc::kInvalidArgument);
  iris::FunctionBootstrap bootstrap(0, 2, noop);
  int value = 0;
  EXPECT_EQ(error_of([&] { bootstrap.allgather(nullptr, &value, 4); }).code(),
            Errc::kInvalidArgument);
  EXPECT_EQ(error_of([&] { bootstrap.broadcast(&value, 4, 2); }).code(), Errc::kInvalidArgument);
  EXPECT_EQ(error_of([&] { bootstrap.broadcast(nullptr, 4, 0); }).code(), Errc::kInvalidArgument);
  bootstrap.allgather(nullptr, nullptr, 0);  // nothing to move: no buffers needed
}

TEST(SingleRankBootstrap, CollectivesAreCopies) {
  auto bootstrap = iris::make_single_rank_bootstrap();
  EXPECT_EQ(bootstrap->rank(), 0);
  EXPECT_EQ(bootstrap->world_size(), 1);
  const int sent = 42;
  int received = 0;
  bootstrap->allgather(&sent, &received, sizeof sent);
  EXPECT_EQ(received, 42);
  bootstrap->broadcast(&received, sizeof received, 0);
  bootstrap->barrier();
  EXPECT_EQ(iris::ranks_on_this_host(*bootstrap), std::vector<int>{0});
}

TEST(RanksOnThisHost, AllForkedRanksShareTheHost) {
  RendezvousServer server(fresh_unix_endpoint(), 3, kSecret, 20s);
  const auto outcomes = run_forked(3, [&](int rank) {
    auto bootstrap = iris::connect_bootstrap(server.endpoint(), rank, 3, kSecret, 20s);
    require(iris::ranks_on_this_host(*bootstrap) == std::vector<int>{0, 1, 2},
            "ranks on this host");
  });
  for (const auto& outcome : outcomes) EXPECT_TRUE(outcome.succeeded()) << outcome;
}

// ---------------------------------------------------------------------------------------------
// bootstrap_from_env

// Clears every variable bootstrap_from_env reads, so that the test's own environment cannot
// steer it.
void clear_launcher_variables(iris::test::ScopedEnv& env) {
  for (const char* name : {"IRIS_BOOTSTRAP",
                           "IRIS_RANK",
                           "IRIS_WORLD_SIZE",
                           "IRIS_JOB_SECRET",
                           "IRIS_BOOTSTRAP_PORT",
                           "IRIS_BOOTSTRAP_TIMEOUT",
                           "RANK",
                           "WORLD_SIZE",
                           "MASTER_ADDR",
                           "MASTER_PORT",
                           "OMPI_COMM_WORLD_RANK",
                           "OMPI_COMM_WORLD_SIZE",
                           "PMI_RANK",
                           "PMI_SIZE",
                           "TORCHELASTIC_RUN_ID",
                           "OMPI_MCA_ess_base_jobid",
                           "PMIX_NAMESPACE",
                           "SLURM_JOB_ID",
                           "LOCAL_RANK",
                           "LOCAL_WORLD_SIZE",
                           "IRIS_LOCAL_RANK",
                           "IRIS_LOCAL_WORLD_SIZE",
                           "TORCHELASTIC_RESTART_COUNT",
                           "SLURM_STEP_ID"})
    env.unset(name);
}

// A TCP port that was free a moment ago.
int free_tcp_port() {
  iris::detail::UniqueFd listener =
      iris::detail::listen_at(iris::detail::parse_endpoint("tcp:127.0.0.1:0"), SOCK_STREAM, 1);
  return iris::detail::bound_endpoint(listener.get(),
                                      iris::detail::parse_endpoint("tcp:127.0.0.1:0"))
      .port;
}

TEST(BootstrapFromEnv, AloneIsASingleRank) {
  iris::test::ScopedEnv env;
  clear_launcher_variables(env);
  auto bootstrap = iris::bootstrap_from_env();
  EXPECT_EQ(bootstrap->rank(), 0);
  EXPECT_EQ(bootstrap->world_size(), 1);
}

TEST(BootstrapFromEnv, IrisRunVariablesConnectToTheLaunchersRendezvous) {
  RendezvousServer server(fresh_unix_endpoint(), 1, kSecret, 10s);
  iris::test::ScopedEnv env;
  clear_launcher_variables(env);
  env.set("IRIS_BOOTSTRAP", server.endpoint()).set("IRIS_RANK", "0").set("IRIS_WORLD_SIZE", "1");
  env.set("IRIS_JOB_SECRET", kSecret).set("IRIS_BOOTSTRAP_TIMEOUT", "5");
  auto bootstrap = iris::bootstrap_from_env();
  bootstrap->barrier();
  env.set("IRIS_JOB_SECRET", "another job's");
  EXPECT_THAT(error_of([] { iris::bootstrap_from_env(); }).message(),
              HasSubstr("wrong job secret"));
}

TEST(BootstrapFromEnv, ReportsMissingAndMalformedVariables) {
  iris::test::ScopedEnv env;
  clear_launcher_variables(env);
  env.set("IRIS_BOOTSTRAP", fresh_unix_endpoint());
  Error error = error_of([] { iris::bootstrap_from_env(); });
  EXPECT_EQ(error.code(), Errc::kInvalidArgument);
  EXPECT_THAT(error.message(), HasSubstr("IRIS_BOOTSTRAP is set but no rank is"));
  env.set("IRIS_RANK", "0");
  error = error_of([] { iris::bootstrap_from_env(); });
  EXPECT_THAT(error.message(), HasSubstr("IRIS_RANK is set but IRIS_WORLD_SIZE is not"));
  env.set("IRIS_WORLD_SIZE", "two");
  error = error_of([] { iris::bootstrap_from_env(); });
  EXPECT_THAT(error.message(), HasSubstr("IRIS_WORLD_SIZE"));
  env.set("IRIS_WORLD_SIZE", "2").set("IRIS_BOOTSTRAP_TIMEOUT", "soon");
  error = error_of([] { iris::bootstrap_from_env(); });
  EXPECT_THAT(error.message(), HasSubstr("IRIS_BOOTSTRAP_TIMEOUT"));
  clear_launcher_variables(env);
  env.set("RANK", "5").set("WORLD_SIZE", "2");
  EXPECT_THAT(error_of([] { iris::bootstrap_from_env(); }).message(),
              HasSubstr("RANK=5 is out of range for WORLD_SIZE=2"));
}

TEST(BootstrapFromEnv, TorchrunRankZeroServesTheOthers) {
  const int port = free_tcp_port();
  const auto outcomes = run_forked(3, [&](int rank) {
    iris::test::ScopedEnv env;
    clear_launcher_variables(env);
    env.set("RANK", std::to_string(rank)).set("WORLD_SIZE", "3").set("MASTER_ADDR", "127.0.0.1");
    env.set("MASTER_PORT", std::to_string(port - 1)).set("TORCHELASTIC_RUN_ID", "job-17");
    env.set("IRIS_BOOTSTRAP_TIMEOUT", "20");
    auto bootstrap = iris::bootstrap_from_env();
    require(bootstrap->rank() == rank && bootstrap->world_size() == 3, "rank and world size");
    exercise_collectives(*bootstrap, 5);
    // A second Context's bootstrap: rank 0 serves it from the server it already runs.
    bootstrap.reset();
    auto second = iris::bootstrap_from_env();
    exercise_collectives(*second, 2);
  });
  for (const auto& outcome : outcomes) EXPECT_TRUE(outcome.succeeded()) << outcome;
}

TEST(BootstrapFromEnv, OpenMpiRanksWithAnotherJobsIdAreRefused) {
  const int port = free_tcp_port();
  const auto outcomes = run_forked(3, [&](int rank) {
    iris::test::ScopedEnv env;
    clear_launcher_variables(env);
    env.set("OMPI_COMM_WORLD_RANK", std::to_string(rank == 2 ? 1 : rank))
        .set("OMPI_COMM_WORLD_SIZE", "2");
    env.set("IRIS_BOOTSTRAP_PORT", std::to_string(port)).set("IRIS_BOOTSTRAP_TIMEOUT", "20");
    // Process 2 claims rank 1 of another job: it must be refused for its job id.
    env.set("OMPI_MCA_ess_base_jobid", rank == 2 ? "4242" : "77");
    if (rank == 2) std::this_thread::sleep_for(100ms);
    auto bootstrap = iris::bootstrap_from_env();
    if (rank == 1) std::this_thread::sleep_for(300ms);  // lets the impostor try first
    exercise_collectives(*bootstrap, 3);
  });
  EXPECT_TRUE(outcomes[0].succeeded()) << outcomes[0];
  EXPECT_TRUE(outcomes[1].succeeded()) << outcomes[1];
  EXPECT_TRUE(outcomes[2].threw(Errc::kBootstrap)) << outcomes[2];
  EXPECT_THAT(outcomes[2].message, HasSubstr("wrong job secret")) << outcomes[2];
}

TEST(BootstrapFromEnv, PmiWithOneRankNeedsNoServer) {
  iris::test::ScopedEnv env;
  clear_launcher_variables(env);
  env.set("PMI_RANK", "0").set("PMI_SIZE", "1").set("IRIS_BOOTSTRAP_PORT", "1");
  auto bootstrap = iris::bootstrap_from_env();
  EXPECT_EQ(bootstrap->world_size(), 1);
  bootstrap->barrier();
}

// ---------------------------------------------------------------------------------------------
// Isolation and messages (issue 12)

// Two torchrun jobs under torchrun's default rendezvous id ("none") whose Iris port is the
// same: job B's rank 1 tries job A's rendezvous first and must be refused, and job A must not
// notice. `secrets` (job A's, job B's) are IRIS_JOB_SECRET values, or empty for derived ones.
void two_jobs_on_one_port(const std::string& secret_a, const std::string& secret_b) {
  const int port = free_tcp_port();
  // Torchrun's store ports, which differ between two jobs running at once (nothing listens on
  // them here: Iris only reads them).
  const int store_a = 29500;
  const int store_b = 29502;
  const auto outcomes = run_forked(3, [&](int process) {
    iris::test::ScopedEnv env;
    clear_launcher_variables(env);
    const bool job_b = process == 2;
    env.set("RANK", std::to_string(job_b ? 1 : process)).set("WORLD_SIZE", "2");
    env.set("MASTER_ADDR", "127.0.0.1").set("TORCHELASTIC_RUN_ID", "none");
    env.set("MASTER_PORT", std::to_string(job_b ? store_b : store_a));
    env.set("IRIS_BOOTSTRAP_PORT", std::to_string(port)).set("IRIS_BOOTSTRAP_TIMEOUT", "20");
    const std::string& secret = job_b ? secret_b : secret_a;
    if (!secret.empty()) env.set("IRIS_JOB_SECRET", secret);
    if (job_b) std::this_thread::sleep_for(100ms);         // after job A's rank 0 serves
    if (process == 1) std::this_thread::sleep_for(400ms);  // job A's rank 1 comes last
    auto bootstrap = iris::bootstrap_from_env();
    exercise_collectives(*bootstrap, 3);
  });
  EXPECT_TRUE(outcomes[0].succeeded()) << outcomes[0];
  EXPECT_TRUE(outcomes[1].succeeded()) << outcomes[1];
  EXPECT_TRUE(outcomes[2].threw(Errc::kBootstrap)) << outcomes[2];
  EXPECT_THAT(outcomes[2].message, HasSubstr("wrong job secret")) << outcomes[2];
}

TEST(BootstrapFromEnv, TorchrunJobsWithTheDefaultRunIdAreToldApart) {
  two_jobs_on_one_port("", "");
}

TEST(BootstrapFromEnv, AGivenSecretKeepsAnotherJobOut) {
  two_jobs_on_one_port("secret of job A", "secret of job B");
}

TEST(Rendezvous, ARefusedRankIsReportedAsRefusedNotAsNeverConnected) {
  RendezvousServer server(fresh_unix_endpoint(), 2, kSecret, 1s);
  EXPECT_THAT(
      error_of([&] { iris::connect_bootstrap(server.endpoint(), 1, 2, "wrong", 5s); }).message(),
      HasSubstr("wrong job secret"));
  auto bootstrap = iris::connect_bootstrap(server.endpoint(), 0, 2, kSecret, 5s);
  const Error error = error_of([&] { bootstrap->barrier(); });
  EXPECT_EQ(error.code(), Errc::kTimeout);
  EXPECT_THAT(error.message(), HasSubstr("rank 1 connected but was refused: wrong job secret"));
  EXPECT_THAT(error.message(), testing::Not(HasSubstr("never connected")));
}

TEST(Rendezvous, ARankKnownToHaveExitedFailsTheOthersAtOnce) {
  RendezvousServer server(fresh_unix_endpoint(), 3, kSecret, 30s);
  server.rank_exited(2, "exited with code 0");
  const auto start = std::chrono::steady_clock::now();
  auto bootstrap = iris::connect_bootstrap(server.endpoint(), 0, 3, kSecret, 30s);
  const Error error = error_of([&] { bootstrap->barrier(); });
  EXPECT_LT(seconds_since(start), 5.0);
  EXPECT_EQ(error.code(), Errc::kBootstrap);
  EXPECT_THAT(error.message(),
              HasSubstr("rank 2 exited with code 0 without joining the job's rendezvous"));
}

// A TCP server that is not Iris: it answers every connection with `answer` (or nothing) and
// keeps it open for two seconds.
class ForeignServer {
 public:
  explicit ForeignServer(std::string answer)
      : listener_(iris::detail::listen_at(iris::detail::parse_endpoint("tcp:127.0.0.1:0"),
                                          SOCK_STREAM, 4)),
        endpoint_(iris::detail::bound_endpoint(listener_.get(),
                                               iris::detail::parse_endpoint("tcp:127.0.0.1:0"))
                      .to_string()),
        thread_([this, answer = std::move(answer)] {
          pollfd entry{listener_.get(), POLLIN, 0};
          if (::poll(&entry, 1, 5000) <= 0) return;
          iris::detail::UniqueFd peer(::accept(listener_.get(), nullptr, nullptr));
          if (!answer.empty()) (void)!::write(peer.get(), answer.data(), answer.size());
          std::this_thread::sleep_for(2s);
        }) {}
  ~ForeignServer() { thread_.join(); }
  const std::string& endpoint() const { return endpoint_; }

 private:
  iris::detail::UniqueFd listener_;
  std::string endpoint_;
  std::thread thread_;
};

TEST(Rendezvous, AForeignServerOnThePortIsNamedAsSuch) {
  ForeignServer foreign("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
  const Error error =
      error_of([&] { iris::connect_bootstrap(foreign.endpoint(), 0, 2, kSecret, 3s); });
  EXPECT_EQ(error.code(), Errc::kBootstrap);
  EXPECT_THAT(error.message(), HasSubstr("is not an Iris rendezvous"));
  EXPECT_THAT(error.message(), testing::Not(HasSubstr("malformed")));
}

TEST(Rendezvous, ASilentForeignServerHonoursTheTimeout) {
  ForeignServer foreign("");
  const auto start = std::chrono::steady_clock::now();
  const Error error =
      error_of([&] { iris::connect_bootstrap(foreign.endpoint(), 0, 2, kSecret, 1s); });
  EXPECT_LT(seconds_since(start), 1.8);  // the timeout, not the timeout plus the grace
  EXPECT_EQ(error.code(), Errc::kTimeout);
  EXPECT_THAT(error.message(), HasSubstr("is not an Iris rendezvous"));
}

}  // namespace
