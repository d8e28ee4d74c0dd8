// exchange_fds: file descriptors passed between real processes with SCM_RIGHTS.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "detail/fd_passing.hpp"
#include "detail/rendezvous.hpp"
#include "iris/host/bootstrap.hpp"
#include "iris/host/error.hpp"
#include "support/open_fds.hpp"
#include "unit/helpers/forked_ranks.hpp"

namespace {

using namespace std::chrono_literals;
using iris::Errc;
using iris::detail::exchange_fds;
using iris::detail::UniqueFd;
using iris::test::open_fd_count;
using iris::test::require;
using testing::HasSubstr;

const std::string kSecret = "fd-test";

std::string content_of_rank(int rank) {
  return "the memfd of rank " + std::to_string(rank);
}

// A memfd holding content_of_rank(rank).
UniqueFd make_memfd(int rank) {
  UniqueFd fd(::memfd_create(("iris-fd-test-" + std::to_string(rank)).c_str(), MFD_CLOEXEC));
  require(fd.valid(), "memfd_create failed");
  const std::string content = content_of_rank(rank);
  require(
      ::pwrite(fd.get(), content.data(), content.size(), 0) == static_cast<ssize_t>(content.size()),
      "pwrite failed");
  return fd;
}

// The first `bytes` bytes of the file.
std::string read_start(int fd, std::size_t bytes) {
  std::string text(bytes, '\0');
  const ssize_t got = ::pread(fd, text.data(), bytes, 0);
  text.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
  return text;
}

// Each rank checks what it received: a descriptor of each local peer's memfd (the same file:
// a write through it is seen by the owner), and nothing for anyone else.
void check_received(const std::vector<UniqueFd>& received, int rank,
                    const std::vector<int>& local_ranks, int world_size) {
  require(received.size() == static_cast<std::size_t>(world_size), "one entry per rank");
  for (int r = 0; r < world_size; ++r) {
    const bool expected =
        r != rank && std::find(local_ranks.begin(), local_ranks.end(), r) != local_ranks.end();
    require(received[r].valid() == expected, "rank " + std::to_string(rank) + ": entry " +
                                                 std::to_string(r) +
                                                 (expected ? " is missing" : " should be empty"));
    if (!expected) continue;
    const std::string expected_content = content_of_rank(r);
    const std::string content = read_start(received[r].get(), expected_content.size());
    require(content == expected_content, "rank " + std::to_string(rank) + " read '" + content +
                                             "' through rank " + std::to_string(r) + "'s fd");
    require((::fcntl(received[r].get(), F_GETFD) & FD_CLOEXEC) != 0,
            "received fds are close-on-exec");
  }
}

TEST(FdPassing, FourProcessesReadEachOthersMemfds) {
  iris::detail::RendezvousServer server("unix:@iris-fd-test-" + iris::detail::random_hex(8), 4,
                                        kSecret, 20s);
  const auto outcomes = iris::test::run_forked(4, [&](int rank) {
    auto bootstrap = iris::connect_bootstrap(server.endpoint(), rank, 4, kSecret, 20s);
    UniqueFd memfd = make_memfd(rank);
    const std::vector<int> local_ranks = iris::ranks_on_this_host(*bootstrap);
    require(local_ranks == std::vector<int>({0, 1, 2, 3}), "all ranks are local");
    const std::size_t fds_before = open_fd_count();
    {
      const auto received = exchange_fds(*bootstrap, memfd.get(), local_ranks, 10s);
      check_received(received, rank, local_ranks, 4);
      // Writing through a peer's descriptor reaches the peer's file.
      const std::string mark = "!";
      const int next = (rank + 1) % 4;
      require(::pwrite(received[next].get(), mark.data(), 1, 100) == 1,
              "pwrite through a peer's fd");
    }
    require(open_fd_count() == fds_before, "fds leaked: " + std::to_string(open_fd_count()) +
                                               " open, " + std::to_string(fds_before) + " before");
    bootstrap->barrier();  // every rank has written its mark
    char seen = 0;
    require(::pread(memfd.get(), &seen, 1, 100) == 1 && seen == '!',
            "the previous rank's write is visible");
    // A second exchange on the same bootstrap works as well as the first.
    const auto again = exchange_fds(*bootstrap, memfd.get(), local_ranks, 10s);
    check_received(again, rank, local_ranks, 4);
  });
  for (const auto& outcome : outcomes) EXPECT_TRUE(outcome.succeeded()) << outcome;
}

TEST(FdPassing, OnlyRanksOfTheSameHostExchange) {
  // Ranks {0, 1} and {2, 3} pretend to be on two hosts.
  iris::detail::RendezvousServer server("unix:@iris-fd-test-" + iris::detail::random_hex(8), 4,
                                        kSecret, 20s);
  const auto outcomes = iris::test::run_forked(4, [&](int rank) {
    auto bootstrap = iris::connect_bootstrap(server.endpoint(), rank, 4, kSecret, 20s);
    UniqueFd memfd = make_memfd(rank);
    const std::vector<int> local_ranks = rank < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3};
    check_received(exchange_fds(*bootstrap, memfd.get(), local_ranks, 10s), rank, local_ranks, 4);
  });
  for (const auto& outcome : outcomes) EXPECT_TRUE(outcome.succeeded()) << outcome;
}

TEST(FdPassing, RanksThatDisagreeOnTheirHostAreAMismatch) {
  iris::detail::RendezvousServer server("unix:@iris-fd-test-" + iris::detail::random_hex(8), 2,
                                        kSecret, 20s);
  const auto outcomes = iris::test::run_forked(2, [&](int rank) {
    auto bootstrap = iris::connect_bootstrap(server.endpoint(), rank, 2, kSecret, 20s);
    UniqueFd memfd = make_memfd(rank);
    const std::vector<int> local_ranks = rank == 0 ? std::vector<int>{0, 1} : std::vector<int>{1};
    exchange_fds(*bootstrap, memfd.get(), local_ranks, 5s);
  });
  EXPECT_TRUE(outcomes[0].threw(Errc::kMismatch)) << outcomes[0];
  EXPECT_THAT(outcomes[0].message, HasSubstr("rank 1 lists other ranks on this host"))
      << outcomes[0];
  EXPECT_TRUE(outcomes[1].succeeded()) << outcomes[1];  // it expects no peer, so it has none
}

TEST(FdPassing, ARequestWithoutAValidRankIsRefused) {
  // The "other rank" of this bootstrap echoes this rank's own offer, so this rank asks its own
  // listener for an fd, naming itself: the listener must refuse, and the exchange must fail
  // rather than hand the fd out or hang.
  iris::FunctionBootstrap bootstrap(0, 2, [](const void* send, void* recv, std::size_t bytes) {
    std::memcpy(recv, send, bytes);
    std::memcpy(static_cast<char*>(recv) + bytes, send, bytes);
  });
  UniqueFd memfd = make_memfd(0);
  const std::size_t fds_before = open_fd_count();
  try {
    exchange_fds(bootstrap, memfd.get(), {0, 1}, 5s);
    ADD_FAILURE() << "the exchange succeeded";
  } catch (const iris::Error& error) {
    EXPECT_EQ(error.code(), Errc::kBootstrap) << error.what();
    EXPECT_THAT(error.message(),
                HasSubstr("closed the fd exchange before sending its file descriptor"));
  }
  EXPECT_EQ(open_fd_count(), fds_before);
}

TEST(FdPassing, ARankAloneOnItsHostGetsNothing) {
  auto bootstrap = iris::make_single_rank_bootstrap();
  UniqueFd memfd = make_memfd(0);
  const auto received = exchange_fds(*bootstrap, memfd.get(), {0}, 1s);
  ASSERT_EQ(received.size(), 1u);
  EXPECT_FALSE(received[0].valid());
}

TEST(FdPassing, RejectsBadArguments) {
  auto bootstrap = iris::make_single_rank_bootstrap();
  UniqueFd memfd = make_memfd(0);
  const auto error_code = [&](int fd, const std::vector<int>& local_ranks,
                              std::chrono::nanoseconds timeout) {
    try {
      exchange_fds(*bootstrap, fd, local_ranks, timeout);
    } catch (const iris::Error& error) {
      return error.code();
    }
    return Errc::kInternal;
  };
  EXPECT_EQ(error_code(-1, {0}, 1s), Errc::kInvalidArgument);
  EXPECT_EQ(error_code(memfd.get(), {}, 1s), Errc::kInvalidArgument);      // without this rank
  EXPECT_EQ(error_code(memfd.get(), {0, 1}, 1s), Errc::kInvalidArgument);  // out of range
  EXPECT_EQ(error_code(memfd.get(), {0}, 0s), Errc::kInvalidArgument);
  iris::FunctionBootstrap two(1, 2, [](const void*, void*, std::size_t) {});
  try {
    exchange_fds(two, memfd.get(), {1, 0}, 1s);
    ADD_FAILURE() << "unsorted local ranks were accepted";
  } catch (const iris::Error& error) {
    EXPECT_EQ(error.code(), Errc::kInvalidArgument);
    EXPECT_THAT(error.message(), HasSubstr("sorted"));
  }
}

TEST(UniqueFd, ClosesOnceAndMoves) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const std::size_t before = open_fd_count();
  {
    UniqueFd reader(fds[0]);
    UniqueFd writer(fds[1]);
    UniqueFd moved = std::move(reader);
    EXPECT_FALSE(reader.valid());
    EXPECT_EQ(moved.get(), fds[0]);
    moved = std::move(writer);  // closes the reader
    EXPECT_EQ(moved.get(), fds[1]);
    EXPECT_EQ(open_fd_count(), before - 1);
    const int raw = moved.release();
    EXPECT_FALSE(moved.valid());
    moved.reset(raw);
  }
  EXPECT_EQ(open_fd_count(), before - 2);
}

}  // namespace
