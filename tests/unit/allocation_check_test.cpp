// The allocation-sequence check, with ranks as threads of this process (tests/support's
// ThreadBootstrap), and the ThreadBootstrap itself.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <random>
#include <source_location>
#include <string>
#include <vector>

#include "detail/allocation_check.hpp"
#include "detail/allocator.hpp"
#include "iris/host/error.hpp"
#include "support/thread_bootstrap.hpp"

namespace {

using iris::Errc;
using iris::detail::AllocationCheck;
using iris::detail::HeapAllocator;
using iris::test::run_ranks;
using testing::HasSubstr;
using testing::Not;

constexpr std::size_t MiB = std::size_t{1} << 20;
constexpr std::size_t TiB = std::size_t{1} << 40;
constexpr int kWorldSize = 4;

// One rank's heap with the check on, as the runtime wires them. The call site recorded is the
// caller's, as it is for an application calling the runtime.
struct CheckedHeap {
  explicit CheckedHeap(iris::Bootstrap& bootstrap) : allocator(MiB, 65 * MiB), check(bootstrap) {}

  std::size_t allocate(std::size_t bytes, std::size_t alignment = HeapAllocator::kGranularity,
                       std::source_location where = std::source_location::current()) {
    return iris::detail::checked_allocate(allocator, &check, bytes, alignment, where);
  }
  void free(std::size_t offset, std::source_location where = std::source_location::current()) {
    iris::detail::checked_free(allocator, &check, offset, where);
  }

  HeapAllocator allocator;
  AllocationCheck check;
};

// The iris::Error in `failure`; a test failure if it holds something else or nothing.
std::optional<iris::Error> error_in(const std::exception_ptr& failure) {
  if (!failure) {
    ADD_FAILURE() << "expected an iris::Error, but the rank returned normally";
    return std::nullopt;
  }
  try {
    std::rethrow_exception(failure);
  } catch (const iris::Error& error) {
    return error;
  } catch (const std::exception& error) {
    ADD_FAILURE() << "expected an iris::Error, got: " << error.what();
  }
  return std::nullopt;
}

void expect_no_failures(const std::vector<std::exception_ptr>& failures) {
  for (std::size_t rank = 0; rank < failures.size(); ++rank) {
    if (!failures[rank]) continue;
    try {
      std::rethrow_exception(failures[rank]);
    } catch (const std::exception& error) {
      ADD_FAILURE() << "rank " << rank << " failed: " << error.what();
    }
  }
}

// Every rank failed with `code`, and every rank's message is the same and contains `parts`.
std::string expect_same_error_everywhere(const std::vector<std::exception_ptr>& failures, Errc code,
                                         const std::vector<std::string>& parts) {
  std::string first_message;
  for (std::size_t rank = 0; rank < failures.size(); ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const auto error = error_in(failures[rank]);
    if (!error) continue;
    EXPECT_EQ(error->code(), code) << error->what();
    for (const std::string& part : parts) EXPECT_THAT(error->message(), HasSubstr(part));
    if (rank == 0) first_message = error->message();
    EXPECT_EQ(error->message(), first_message);
  }
  return first_message;
}

std::string site(int line) {
  return "allocation_check_test.cpp:" + std::to_string(line);
}

TEST(AllocationCheck, IdenticalSequencesPass) {
  constexpr int kOperations = 2000;
  std::vector<std::vector<std::size_t>> offsets(kWorldSize);
  std::vector<std::uint64_t> calls_checked(kWorldSize);
  const auto failures = run_ranks(kWorldSize, [&](iris::Bootstrap& bootstrap) {
    CheckedHeap heap(bootstrap);
    std::mt19937_64 random(99);  // the same sequence on every rank
    std::vector<std::size_t> live;
    for (int step = 0; step < kOperations; ++step) {
      if (live.empty() || random() % 100 < 55) {
        const std::size_t bytes = random() % (512 * 1024);
        const std::size_t alignment = std::size_t{1} << (random() % 16);
        live.push_back(heap.allocate(bytes, alignment));
        offsets[bootstrap.rank()].push_back(live.back());
      } else {
        const std::size_t index = random() % live.size();
        heap.free(live[index]);
        live[index] = live.back();
        live.pop_back();
      }
    }
    calls_checked[bootstrap.rank()] = heap.check.calls_checked();
  });
  expect_no_failures(failures);
  for (int rank = 1; rank < kWorldSize; ++rank) EXPECT_EQ(offsets[rank], offsets[0]);
  for (int rank = 0; rank < kWorldSize; ++rank) EXPECT_EQ(calls_checked[rank], kOperations);
}

TEST(AllocationCheck, CallSitesMayDifferWhenTheCallsAgree) {
  const auto failures = run_ranks(kWorldSize, [](iris::Bootstrap& bootstrap) {
    CheckedHeap heap(bootstrap);
    const std::size_t offset = bootstrap.rank() == 0 ? heap.allocate(4096) : heap.allocate(4096);
    heap.free(offset);
  });
  expect_no_failures(failures);
}

TEST(AllocationCheck, DivergentSizeIsNamedOnEveryRank) {
  std::vector<int> lines(kWorldSize);
  std::vector<std::size_t> live_after(kWorldSize);
  const auto failures = run_ranks(kWorldSize, [&](iris::Bootstrap& bootstrap) {
    CheckedHeap heap(bootstrap);
    for (int i = 0; i < 6; ++i) heap.allocate(1000);
    try {
      if (bootstrap.rank() == 1) {
        lines[1] = __LINE__ + 1;
        heap.allocate(8192);
      } else {
        lines[bootstrap.rank()] = __LINE__ + 1;
        heap.allocate(4096);
      }
    } catch (...) {
      live_after[bootstrap.rank()] = heap.allocator.live_count();
      throw;
    }
  });
  expect_same_error_everywhere(
      failures, Errc::kMismatch,
      {"symmetric heap call #7 (allocations and frees, counted from 1) differs between ranks: "
       "ranks 0, 2-3 allocate 4096 B with alignment 256 at " +
       site(lines[0]) + "; rank 1 allocate 8192 B with alignment 256 at " + site(lines[1]) +
       ". Every rank must make the same symmetric allocations and frees"});
  // The mismatched allocation was undone: the heaps are as they were before the call.
  for (int rank = 0; rank < kWorldSize; ++rank) EXPECT_EQ(live_after[rank], 6u);
}

TEST(AllocationCheck, DivergentOrderIsCaughtAtItsFirstCall) {
  const auto failures = run_ranks(kWorldSize, [](iris::Bootstrap& bootstrap) {
    CheckedHeap heap(bootstrap);
    heap.free(heap.allocate(100));  // calls #1 and #2 agree
    if (bootstrap.rank() == 2) {
      heap.allocate(8192);
      heap.allocate(4096);
    } else {
      heap.allocate(4096);
      heap.allocate(8192);
    }
  });
  expect_same_error_everywhere(
      failures, Errc::kMismatch,
      {"symmetric heap call #3 ", "ranks 0-1, 3 allocate 4096 B", "rank 2 allocate 8192 B"});
}

TEST(AllocationCheck, FreeAgainstAllocateIsCaughtBeforeAnythingIsFreed) {
  std::vector<std::size_t> live_after(kWorldSize);
  const auto failures = run_ranks(kWorldSize, [&](iris::Bootstrap& bootstrap) {
    CheckedHeap heap(bootstrap);
    std::vector<std::size_t> offsets;
    for (int i = 0; i < 3; ++i) offsets.push_back(heap.allocate(4096));
    try {
      if (bootstrap.rank() == 3)
        heap.free(offsets[1]);
      else
        heap.allocate(4096);
    } catch (...) {
      live_after[bootstrap.rank()] = heap.allocator.live_count();
      throw;
    }
  });
  expect_same_error_everywhere(
      failures, Errc::kMismatch,
      {"symmetric heap call #4 ", "ranks 0-2 allocate 4096 B with alignment 256 at",
       "rank 3 free offset " + std::to_string(MiB + 4096) + " (an allocation of 4096 B) at"});
  for (int rank = 0; rank < kWorldSize; ++rank) EXPECT_EQ(live_after[rank], 3u);
}

TEST(AllocationCheck, DivergentFreeOffsetIsCaught) {
  const auto failures = run_ranks(kWorldSize, [](iris::Bootstrap& bootstrap) {
    CheckedHeap heap(bootstrap);
    const std::size_t first = heap.allocate(4096);
    const std::size_t second = heap.allocate(4096);
    heap.free(bootstrap.rank() == 0 ? second : first);
  });
  const std::string message = expect_same_error_everywhere(
      failures, Errc::kMismatch,
      {"symmetric heap call #3 ",
       "rank 0 free offset " + std::to_string(MiB + 4096) + " (an allocation of 4096 B) at",
       "ranks 1-3 free offset " + std::to_string(MiB) + " (an allocation of 4096 B) at"});
  EXPECT_THAT(message, Not(HasSubstr("requests agree")));
}

TEST(AllocationCheck, AFailureOnOneRankIsAMismatchNotAHang) {
  const auto failures = run_ranks(kWorldSize, [](iris::Bootstrap& bootstrap) {
    CheckedHeap heap(bootstrap);
    heap.allocate(bootstrap.rank() == 0 ? TiB : 4096);
  });
  expect_same_error_everywhere(
      failures, Errc::kMismatch,
      {"symmetric heap call #1 ",
       "rank 0 allocate 1099511627776 B = 1.0 TiB with alignment 256, which failed there, at",
       "ranks 1-3 allocate 4096 B"});
}

TEST(AllocationCheck, AFailureOnEveryRankIsReportedAsItself) {
  const auto out_of_memory = run_ranks(kWorldSize, [](iris::Bootstrap& bootstrap) {
    CheckedHeap heap(bootstrap);
    heap.allocate(TiB);
  });
  expect_same_error_everywhere(out_of_memory, Errc::kOutOfMemory, {"cannot allocate"});

  const auto double_free = run_ranks(kWorldSize, [](iris::Bootstrap& bootstrap) {
    CheckedHeap heap(bootstrap);
    const std::size_t offset = heap.allocate(4096);
    heap.free(offset);
    heap.free(offset);
  });
  expect_same_error_everywhere(double_free, Errc::kInvalidArgument,
                               {"cannot free offset " + std::to_string(MiB)});

  const auto bad_alignment = run_ranks(kWorldSize, [](iris::Bootstrap& bootstrap) {
    CheckedHeap heap(bootstrap);
    heap.allocate(4096, 3);
  });
  expect_same_error_everywhere(bad_alignment, Errc::kInvalidArgument, {"alignment 3"});
}

TEST(AllocationCheck, ADoubleFreeOnOneRankIsAMismatch) {
  const auto failures = run_ranks(kWorldSize, [](iris::Bootstrap& bootstrap) {
    CheckedHeap heap(bootstrap);
    const std::size_t offset = heap.allocate(4096);
    heap.free(offset);
    if (bootstrap.rank() == 1)
      heap.free(offset);
    else
      heap.allocate(4096);
  });
  expect_same_error_everywhere(
      failures, Errc::kMismatch,
      {"symmetric heap call #3 ",
       "rank 1 free offset " + std::to_string(MiB) + " (not a live allocation there) at"});
}

TEST(AllocationCheck, DivergedHeapsAreReportedByTheirOffsets) {
  const auto failures = run_ranks(kWorldSize, [](iris::Bootstrap& bootstrap) {
    CheckedHeap heap(bootstrap);
    // An allocation that bypasses the check (as a bug in a caller would) shifts rank 2's heap.
    if (bootstrap.rank() == 2) heap.allocator.allocate(4096);
    heap.allocate(4096);
  });
  expect_same_error_everywhere(
      failures, Errc::kMismatch,
      {"ranks 0-1, 3 allocate 4096 B with alignment 256 (got offset " + std::to_string(MiB) + ")",
       "rank 2 allocate 4096 B with alignment 256 (got offset " + std::to_string(MiB + 4096) + ")",
       "The requests agree but the offsets do not"});
}

TEST(AllocationCheck, EightRanksAreGroupedByWhatTheyDid) {
  const auto failures = run_ranks(8, [](iris::Bootstrap& bootstrap) {
    CheckedHeap heap(bootstrap);
    const bool odd_one = bootstrap.rank() == 3 || bootstrap.rank() == 5;
    heap.allocate(odd_one ? 8192 : 4096);
  });
  const std::string message = expect_same_error_everywhere(
      failures, Errc::kMismatch,
      {"ranks 0-2, 4, 6-7 allocate 4096 B", "ranks 3, 5 allocate 8192 B"});
  EXPECT_THAT(message, Not(HasSubstr("rank 0 ")));
}

TEST(AllocationCheck, ManyDifferentCallsAreSummarised) {
  constexpr int kRanks = 11;
  const auto failures = run_ranks(kRanks, [](iris::Bootstrap& bootstrap) {
    CheckedHeap heap(bootstrap);
    heap.allocate(256 * static_cast<std::size_t>(bootstrap.rank() + 1));
  });
  const std::string message =
      expect_same_error_everywhere(failures, Errc::kMismatch,
                                   {"rank 0 allocate 256 B", "; rank 7 allocate 2048 B",
                                    "; and 3 more groups of ranks that did something else."});
  EXPECT_THAT(message, Not(HasSubstr("rank 8 ")));
}

TEST(AllocationCheck, ACheckThatStartedLateIsNamed) {
  const auto failures = run_ranks(kWorldSize, [](iris::Bootstrap& bootstrap) {
    CheckedHeap heap(bootstrap);
    heap.allocate(4096);
    // Rank 1 starts checking afresh, as if its check had been turned on only now.
    AllocationCheck late(bootstrap);
    AllocationCheck& check = bootstrap.rank() == 1 ? late : heap.check;
    iris::detail::checked_allocate(heap.allocator, &check, 4096, 256,
                                   std::source_location::current());
  });
  expect_same_error_everywhere(
      failures, Errc::kMismatch,
      {"the ranks are at different symmetric heap calls: ", "rank 1 at call #1: allocate 4096 B",
       "ranks 0, 2-3 at call #2: allocate 4096 B",
       "The ranks have checked different numbers of calls"});
}

TEST(ThreadBootstrap, AllgatherPutsContributionsInRankOrderRoundAfterRound) {
  const auto failures = run_ranks(kWorldSize, [](iris::Bootstrap& bootstrap) {
    for (int round = 0; round < 1000; ++round) {
      // The size changes between rounds (equal on all ranks within one).
      const std::size_t count = 1 + round % 5;
      std::vector<int> send(count, round * 100 + bootstrap.rank());
      std::vector<int> received(count * kWorldSize, -1);
      bootstrap.allgather(send.data(), received.data(), count * sizeof(int));
      for (int rank = 0; rank < kWorldSize; ++rank)
        for (std::size_t i = 0; i < count; ++i)
          if (received[rank * count + i] != round * 100 + rank)
            throw std::runtime_error("round " + std::to_string(round) + ": wrong data from rank " +
                                     std::to_string(rank));
    }
  });
  expect_no_failures(failures);
}

TEST(ThreadBootstrap, BroadcastAndBarrier) {
  std::vector<int> values(kWorldSize);
  const auto failures = run_ranks(kWorldSize, [&](iris::Bootstrap& bootstrap) {
    int value = bootstrap.rank() == 2 ? 42 : -1;
    bootstrap.broadcast(&value, sizeof(value), 2);
    bootstrap.barrier();
    values[bootstrap.rank()] = value;
  });
  expect_no_failures(failures);
  EXPECT_EQ(values, std::vector<int>(kWorldSize, 42));
}

TEST(ThreadBootstrap, DifferentSizesAreAMismatchOnEveryRank) {
  const auto failures = run_ranks(kWorldSize, [](iris::Bootstrap& bootstrap) {
    std::vector<char> send(bootstrap.rank() == 1 ? 8 : 4);
    std::vector<char> received(send.size() * kWorldSize);
    bootstrap.allgather(send.data(), received.data(), send.size());
  });
  expect_same_error_everywhere(failures, Errc::kMismatch, {"allgather sizes differ between ranks"});
}

TEST(ThreadBootstrap, ARankThatNeverArrivesIsATimeoutNotAHang) {
  const auto started = std::chrono::steady_clock::now();
  const auto failures = run_ranks(
      kWorldSize,
      [](iris::Bootstrap& bootstrap) {
        if (bootstrap.rank() == 3) return;
        bootstrap.barrier();
      },
      std::chrono::milliseconds(200));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  EXPECT_FALSE(failures[3]);
  int timeouts = 0;
  for (int rank = 0; rank < 3; ++rank) {
    const auto error = error_in(failures[rank]);
    if (!error) continue;
    EXPECT_THAT(error->message(), HasSubstr("rank(s) 3, which never arrived"));
    timeouts += error->code() == Errc::kTimeout;
    EXPECT_TRUE(error->code() == Errc::kTimeout || error->code() == Errc::kBootstrap)
        << error->what();
  }
  EXPECT_GE(timeouts, 1);
}

}  // namespace
