// Runs test code in forked child processes, one per rank, for tests of host logic that must
// cross process boundaries (rendezvous, fd passing).
//
//   auto outcomes = iris::test::run_forked(4, [&](int rank) {
//     auto bootstrap = iris::connect_bootstrap(endpoint, rank, 4, secret, 10s);
//     ...  // throw (or use require()) to fail
//   });
//   EXPECT_TRUE(outcomes[2].succeeded()) << outcomes[2];
//
// Each child runs the body, reports what it threw (an iris::Error's code and message, or any
// exception's what()) through a pipe and leaves with _exit, so that no gtest state, atexit
// handler or stdio buffer of the parent runs twice. Children die with the test process
// (PR_SET_PDEATHSIG), and run_forked kills the ones still running at its deadline: a broken
// test fails, it never hangs.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "iris/host/error.hpp"

namespace iris::test {

/// How one forked rank ended.
struct ForkedOutcome {
  int rank = -1;
  int exit_code = -1;  ///< -1 when killed by a signal
  int signal = 0;      ///< the signal that killed it, or 0
  bool killed_at_deadline = false;
  std::optional<Errc> error_code;  ///< set when the body threw an iris::Error
  std::string message;             ///< what the body threw, if it threw

  bool succeeded() const { return exit_code == 0 && message.empty() && !killed_at_deadline; }
  bool threw(Errc code) const { return error_code == code; }
};

inline std::ostream& operator<<(std::ostream& out, const ForkedOutcome& outcome) {
  out << "rank " << outcome.rank << ": exit code " << outcome.exit_code << ", signal "
      << outcome.signal << (outcome.killed_at_deadline ? " (killed at the deadline)" : "");
  if (!outcome.message.empty()) out << ", threw: " << outcome.message;
  return out;
}

/// Throws std::runtime_error(message) unless `condition` holds: assertions for child bodies.
inline void require(bool condition, const std::string& message) {
  if (!condition) throw std::runtime_error(message);
}

namespace forked_detail {

// Child side: run the body and report through `report`. The first byte says what happened:
// 'o' returned, 'i' threw iris::Error (then the code as a byte), 'x' threw something else.
[[noreturn]] inline void run_child(int rank, const std::function<void(int)>& body, int report) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  std::string record;
  try {
    body(rank);
    record = "o";
  } catch (const Error& error) {
    record = "i";
    record += static_cast<char>(error.code());
    record += error.what();
  } catch (const std::exception& error) {
    record = std::string("x") + error.what();
  }
  const char* data = record.data();
  std::size_t left = record.size();
  while (left > 0) {
    const ssize_t wrote = ::write(report, data, left);
    if (wrote <= 0) break;
    data += wrote;
    left -= static_cast<std::size_t>(wrote);
  }
  ::_exit(record == "o" ? 0 : 1);
}

inline void read_available(int fd, std::string& into) {
  char buffer[4096];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got <= 0) return;
    into.append(buffer, static_cast<std::size_t>(got));
  }
}

inline void decode(const std::string& record, ForkedOutcome& outcome) {
  if (record.empty()) {
    outcome.message = "(no report: the child died before finishing)";
  } else if (record[0] == 'i' && record.size() >= 2) {
    outcome.error_code = static_cast<Errc>(record[1]);
    outcome.message = record.substr(2);
  } else if (record[0] == 'x') {
    outcome.message = record.substr(1);
  }
}

}  // namespace forked_detail

/// Forks `count` children, runs body(rank) in child `rank`, and waits (at most `deadline`) for
/// all of them. Outcomes are indexed by rank.
inline std::vector<ForkedOutcome> run_forked(
    int count, const std::function<void(int)>& body,
    std::chrono::seconds deadline = std::chrono::seconds(60)) {
  std::fflush(nullptr);
  struct Child {
    pid_t pid;
    int report;
    std::string record;
    bool reaped = false;
  };
  std::vector<Child> children;
  for (int rank = 0; rank < count; ++rank) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2() failed");
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork() failed");
    if (pid == 0) {
      ::close(fds[0]);
      forked_detail::run_child(rank, body, fds[1]);
    }
    ::close(fds[1]);
    ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
    children.push_back(Child{pid, fds[0], {}});
  }
  std::vector<ForkedOutcome> outcomes(static_cast<std::size_t>(count));
  const auto until = std::chrono::steady_clock::now() + deadline;
  int left = count;
  while (left > 0) {
    const bool late = std::chrono::steady_clock::now() >= until;
    for (int rank = 0; rank < count; ++rank) {
      Child& child = children[static_cast<std::size_t>(rank)];
      if (child.reaped) continue;
      forked_detail::read_available(child.report, child.record);
      if (late) {
        ::kill(child.pid, SIGKILL);
        outcomes[static_cast<std::size_t>(rank)].killed_at_deadline = true;
      }
      int status = 0;
      if (::waitpid(child.pid, &status, late ? 0 : WNOHANG) != child.pid) continue;
      child.reaped = true;
      --left;
      forked_detail::read_available(child.report, child.record);
      ::close(child.report);
      ForkedOutcome& outcome = outcomes[static_cast<std::size_t>(rank)];
      outcome.rank = rank;
      outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      outcome.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      forked_detail::decode(child.record, outcome);
    }
    if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return outcomes;
}

}  // namespace iris::test
