// An in-process Bootstrap for tests: the ranks are threads of one process.
//
// Collective host logic (the allocation check, anything built on Bootstrap) can then be tested
// with several ranks on a CPU-only machine, without launching processes:
//
//   auto failures = iris::test::run_ranks(4, [](iris::Bootstrap& bootstrap) {
//     ... code that every rank runs; bootstrap.rank() tells them apart ...
//   });
//   // failures[r] holds what rank r threw, or null.
//
// The ThreadBootstraps of one group share a ThreadGroup. A collective completes when every rank
// has entered it; a generation counter lets the group be reused for any number of collectives.
// No wait is unbounded: a rank that waits longer than the group's timeout throws
// iris::Error(kTimeout) naming the ranks that never arrived, and breaks the group so that the
// other ranks stop at once too (a failing test must not hang).
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "iris/host/bootstrap.hpp"
#include "iris/host/error.hpp"

namespace iris::test {

inline constexpr std::chrono::milliseconds kDefaultThreadBootstrapTimeout{10000};

/// What the ranks of one in-process group share.
class ThreadGroup {
 public:
  ThreadGroup(int world_size, std::chrono::milliseconds timeout)
      : world_size_(world_size), timeout_(timeout) {
    if (world_size < 1)
      throw Error(Errc::kInvalidArgument,
                  "thread bootstrap world size " + std::to_string(world_size) + " is below 1");
    reset_round();
  }

  int world_size() const noexcept { return world_size_; }

  /// Collective step of rank `rank`: as Bootstrap::allgather.
  void allgather(int rank, const void* send, void* recv, std::size_t bytes) {
    std::unique_lock lock(mutex_);
    throw_if_broken(rank);
    const auto* first = static_cast<const std::byte*>(send);
    contributions_[rank].assign(first, first + bytes);
    arrived_[rank] = true;
    const std::uint64_t my_generation = generation_;
    if (++arrived_count_ == world_size_) {
      finish_round();
    } else {
      const auto finished = [&] { return generation_ != my_generation || !broken_.empty(); };
      if (!round_finished_.wait_for(lock, timeout_, finished)) {
        broken_ = "rank " + std::to_string(rank) + " waited " + std::to_string(timeout_.count()) +
                  " ms in a collective for " + missing_ranks();
        round_finished_.notify_all();
        throw Error(Errc::kTimeout, broken_);
      }
      if (generation_ == my_generation) throw_if_broken(rank);
    }
    // The finished round stays in completed_ until the next round finishes, which cannot happen
    // before this rank has copied its result out and entered that round.
    if (!completed_error_.empty()) throw Error(Errc::kMismatch, completed_error_);
    auto* out = static_cast<std::byte*>(recv);
    for (int r = 0; r < world_size_; ++r)
      if (bytes != 0 && !completed_[r].empty())
        std::memcpy(out + r * bytes, completed_[r].data(), completed_[r].size());
  }

 private:
  void reset_round() {
    contributions_.assign(world_size_, {});
    arrived_.assign(world_size_, false);
    arrived_count_ = 0;
  }

  // Called by the last rank to arrive, with the lock held.
  void finish_round() {
    completed_error_.clear();
    for (int r = 1; r < world_size_; ++r)
      if (contributions_[r].size() != contributions_[0].size())
        completed_error_ = "allgather sizes differ between ranks: rank 0 sent " +
                           std::to_string(contributions_[0].size()) + " bytes, rank " +
                           std::to_string(r) + " sent " + std::to_string(contributions_[r].size());
    completed_ = std::move(contributions_);
    reset_round();
    ++generation_;
    round_finished_.notify_all();
  }

  std::string missing_ranks() const {
    std::string text;
    for (int r = 0; r < world_size_; ++r)
      if (!arrived_[r]) text += (text.empty() ? "" : ", ") + std::to_string(r);
    return "rank(s) " + text + ", which never arrived";
  }

  void throw_if_broken(int rank) const {
    if (!broken_.empty())
      throw Error(Errc::kBootstrap, "rank " + std::to_string(rank) +
                                        " cannot continue: the group broke when " + broken_);
  }

  std::mutex mutex_;
  std::condition_variable round_finished_;
  const int world_size_;
  const std::chrono::milliseconds timeout_;
  std::uint64_t generation_ = 0;
  int arrived_count_ = 0;
  std::vector<bool> arrived_;
  std::vector<std::vector<std::byte>> contributions_;  // the round in progress, one per rank
  std::vector<std::vector<std::byte>> completed_;      // the last finished round
  std::string completed_error_;                        // why the last finished round failed
  std::string broken_;                                 // why the group can no longer be used
};

/// One rank's view of a ThreadGroup.
class ThreadBootstrap final : public Bootstrap {
 public:
  ThreadBootstrap(std::shared_ptr<ThreadGroup> group, int rank)
      : group_(std::move(group)), rank_(rank) {
    if (rank < 0 || rank >= group_->world_size())
      throw Error(Errc::kInvalidArgument, "thread bootstrap rank " + std::to_string(rank) +
                                              " is outside [0, " +
                                              std::to_string(group_->world_size()) + ")");
  }

  int rank() const noexcept override { return rank_; }
  int world_size() const noexcept override { return group_->world_size(); }

  void allgather(const void* send, void* recv, std::size_t bytes) override {
    group_->allgather(rank_, send, recv, bytes);
  }

  void broadcast(void* data, std::size_t bytes, int root) override {
    std::vector<std::byte> all(bytes * static_cast<std::size_t>(world_size()));
    group_->allgather(rank_, data, all.data(), bytes);
    std::memcpy(data, all.data() + static_cast<std::size_t>(root) * bytes, bytes);
  }

  void barrier() override { group_->allgather(rank_, nullptr, nullptr, 0); }

 private:
  std::shared_ptr<ThreadGroup> group_;
  int rank_;
};

/// Runs `body` on `world_size` threads, each with the ThreadBootstrap of its rank, and returns
/// what each rank threw (null for a rank that returned normally), indexed by rank.
inline std::vector<std::exception_ptr> run_ranks(
    int world_size, const std::function<void(Bootstrap&)>& body,
    std::chrono::milliseconds timeout = kDefaultThreadBootstrapTimeout) {
  auto group = std::make_shared<ThreadGroup>(world_size, timeout);
  std::vector<std::exception_ptr> failures(world_size);
  std::vector<std::thread> threads;
  threads.reserve(world_size);
  for (int rank = 0; rank < world_size; ++rank)
    threads.emplace_back([&, rank] {
      try {
        ThreadBootstrap bootstrap(group, rank);
        body(bootstrap);
      } catch (...) {
        failures[rank] = std::current_exception();
      }
    });
  for (std::thread& thread : threads) thread.join();
  return failures;
}

}  // namespace iris::test
