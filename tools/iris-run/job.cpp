#include "job.hpp"

#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>

#include "detail/rendezvous.hpp"
#include "detail/socket.hpp"
#include "iris/host/env.hpp"
#include "iris/host/error.hpp"
#include "output.hpp"
#include "spawn.hpp"
#include "sweep.hpp"

extern char** environ;

namespace iris::run {
namespace {

using detail::Clock;
using detail::UniqueFd;

// How long ranks get between SIGTERM and SIGKILL.
constexpr auto kGracePeriod = std::chrono::seconds(3);
// How long output pipes may stay open after every rank has exited (a process that left its
// rank's process group can hold them).
constexpr auto kOutputDrainTime = std::chrono::seconds(2);
constexpr auto kDefaultBootstrapTimeout = std::chrono::seconds(120);
constexpr int kTimeoutExitCode = 124;

// Descriptors iris-run holds per rank: two output pipes, the rank's rendezvous connection, and
// one spare for a rank that opens a second bootstrap; plus a few of its own.
constexpr rlim_t kFilesPerRank = 4;
constexpr rlim_t kOwnFiles = 64;

// Checks, before anything starts, that this machine lets iris-run start `ranks` ranks: open
// files (raising the soft limit up to the hard one when needed) and processes. Returns the
// open-files limit the ranks get (the one iris-run started with).
rlimit check_limits(int ranks) {
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) != 0) detail::throw_system_error(errno, "getrlimit()");
  const rlimit original = files;
  const rlim_t needed = kFilesPerRank * static_cast<rlim_t>(ranks) + kOwnFiles;
  if (files.rlim_cur != RLIM_INFINITY && files.rlim_cur < needed) {
    if (files.rlim_max != RLIM_INFINITY && files.rlim_max < needed)
      throw LaunchError("-n " + std::to_string(ranks) + " needs about " + std::to_string(needed) +
                            " open files in iris-run (" + std::to_string(kFilesPerRank) +
                            " per rank), but this process may open at most " +
                            std::to_string(files.rlim_max) +
                            " (ulimit -n): raise the limit or start fewer ranks",
                        1);
    files.rlim_cur = needed;
    if (::setrlimit(RLIMIT_NOFILE, &files) != 0) detail::throw_system_error(errno, "setrlimit()");
  }
  rlimit processes{};
  if (::getrlimit(RLIMIT_NPROC, &processes) == 0 && processes.rlim_cur != RLIM_INFINITY &&
      ::geteuid() != 0 && static_cast<rlim_t>(ranks) + 1 > processes.rlim_cur)
    throw LaunchError("-n " + std::to_string(ranks) + " needs " + std::to_string(ranks + 1) +
                          " processes (the ranks and iris-run's watchdog), but this user may run "
                          "at most " +
                          std::to_string(processes.rlim_cur) +
                          " (ulimit -u): raise the limit or start fewer ranks",
                      1);
  return original;
}

std::string ranks_phrase(int count) {
  return std::to_string(count) + (count == 1 ? " rank" : " ranks");
}

std::string signal_name(int signal) {
  const char* abbreviation = ::sigabbrev_np(signal);
  return abbreviation != nullptr ? std::string("SIG") + abbreviation
                                 : "signal " + std::to_string(signal);
}

// What ended a rank, in words, and the exit code that stands for it.
struct Ending {
  bool success;
  int exit_code;
  std::string description;
};

Ending describe_status(int status) {
  if (WIFEXITED(status)) {
    const int code = WEXITSTATUS(status);
    return {code == 0, code, "exited with code " + std::to_string(code)};
  }
  const int signal = WTERMSIG(status);
  std::string text =
      "was killed by signal " + std::to_string(signal) + " (" + ::strsignal(signal) + ")";
  if (WCOREDUMP(status)) text += ", core dumped";
  return {false, 128 + signal, text};
}

struct Rank {
  int rank;
  pid_t pid;
  bool running = true;
  LineRelay out;
  LineRelay err;
};

class Job {
 public:
  explicit Job(const Options& options) : options_(options) {}

  int run() {
    open_files_limit_ = check_limits(options_.ranks);
    const std::string program = resolve_program(options_.command.front());
    block_signals();
    // The endpoint names the job: every rank's environment carries it, which is how the sweep
    // finds what is left of the job. The watchdog is forked while there is one thread.
    endpoint_ = "unix:@iris-run-" + std::to_string(::getpid()) + "-" + detail::random_hex(8);
    marker_ = std::string(env::kBootstrap) + "=" + endpoint_;
    watchdog_ = std::make_unique<Watchdog>(marker_);
    start_rendezvous();
    try {
      spawn_ranks(program);
      supervise();
    } catch (...) {
      end_every_process();
      throw;
    }
    end_every_process();
    return exit_code_;
  }

 private:
  // ------------------------------------------------------------------------------------------
  // Set-up

  // Signals arrive through a signalfd. They must be blocked before the rendezvous thread starts,
  // so that no thread takes them the default way. SIGPIPE stays blocked: a closed stdout is an
  // EPIPE from write(), not the end of the launcher.
  void block_signals() {
    sigset_t handled;
    sigemptyset(&handled);
    for (const int signal : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&handled, signal);
    sigset_t blocked = handled;
    sigaddset(&blocked, SIGPIPE);
    if (const int error = ::pthread_sigmask(SIG_BLOCK, &blocked, &original_mask_); error != 0)
      detail::throw_system_error(error, "pthread_sigmask()");
    signals_.reset(::signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK));
    if (!signals_) detail::throw_system_error(errno, "signalfd()");
    // Orphans of the ranks (children whose rank has exited) become our children, so that we
    // can reap them and know that they are gone.
    if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
      detail::throw_system_error(errno, "prctl(PR_SET_CHILD_SUBREAPER)");
  }

  void start_rendezvous() {
    secret_ = detail::random_hex(16);
    // Checked like the ranks check it (> 0, decimal, not too large), so that a bad value is a
    // message here, not in every rank.
    if (const auto value = env::get(env::kBootstrapTimeout);
        value &&
        env::parse_seconds(*value, env::kBootstrapTimeout) == std::chrono::nanoseconds::zero())
      throw Error(Errc::kInvalidArgument,
                  std::string(env::kBootstrapTimeout) + "='" + *value +
                      "' is not a bootstrap timeout: it must be more than 0 seconds");
    const auto timeout = env::get_seconds(env::kBootstrapTimeout, kDefaultBootstrapTimeout);
    rendezvous_ =
        std::make_unique<detail::RendezvousServer>(endpoint_, options_.ranks, secret_, timeout);
  }

  std::vector<std::string> rank_environment(int rank) const {
    const int world_size = options_.ranks;
    std::vector<std::pair<std::string, std::string>> settings = {
        {env::kBootstrap, rendezvous_->endpoint()},
        {env::kJobSecret, secret_},
        {env::kRank, std::to_string(rank)},
        {env::kWorldSize, std::to_string(world_size)},
        {env::kLocalRank, std::to_string(rank)},
        {env::kLocalWorldSize, std::to_string(world_size)},
    };
    if (!options_.gpus.empty()) {
      const int device = options_.gpus[static_cast<std::size_t>(rank) % options_.gpus.size()];
      settings.emplace_back(env::kDevice, std::to_string(device));
    }
    std::vector<std::string> environment;
    for (char** entry = environ; *entry != nullptr; ++entry) {
      const std::string_view text = *entry;
      const std::string_view name = text.substr(0, text.find('='));
      const bool replaced = std::any_of(settings.begin(), settings.end(),
                                        [&](const auto& setting) { return setting.first == name; });
      if (!replaced) environment.emplace_back(text);
    }
    for (const auto& [name, value] : settings) environment.push_back(name + "=" + value);
    return environment;
  }

  void spawn_ranks(const std::string& program) {
    ranks_.reserve(static_cast<std::size_t>(options_.ranks));
    for (int rank = 0; rank < options_.ranks; ++rank) {
      SpawnRequest request{program, options_.command, rank_environment(rank), original_mask_,
                           open_files_limit_};
      SpawnedRank spawned = spawn(request);
      watchdog_->guard(spawned.pid);
      const std::string prefix = "[rank " + std::to_string(rank) + "] ";
      ranks_.push_back(std::make_unique<Rank>(
          Rank{rank, spawned.pid, true,
               LineRelay(std::move(spawned.stdout_reader), STDOUT_FILENO, prefix),
               LineRelay(std::move(spawned.stderr_reader), STDERR_FILENO, prefix)}));
    }
    running_ = options_.ranks;
    if (options_.timeout) job_deadline_ = Clock::now() + *options_.timeout;
  }

  // ------------------------------------------------------------------------------------------
  // The loop: output, signals, and the three timers (job timeout, SIGKILL, output drain)

  void supervise() {
    while (running_ > 0 || any_output_open()) {
      if (running_ == 0 && Clock::now() >= output_deadline_) break;
      std::vector<pollfd> fds{{signals_.get(), POLLIN, 0}};
      std::vector<LineRelay*> relays;
      for (const auto& rank : ranks_)
        for (LineRelay* relay : {&rank->out, &rank->err})
          if (relay->open()) {
            fds.push_back({relay->fd(), POLLIN, 0});
            relays.push_back(relay);
          }
      const Clock::time_point wake =
          std::min({job_deadline_, kill_deadline_,
                    running_ == 0 ? output_deadline_ : Clock::time_point::max()});
      if (::poll(fds.data(), fds.size(), detail::poll_timeout_until(wake)) < 0 && errno != EINTR)
        detail::throw_system_error(errno, "poll()");
      for (std::size_t i = 1; i < fds.size(); ++i)
        if (fds[i].revents != 0) relays[i - 1]->relay_available();
      if (fds[0].revents != 0) handle_signals();
      check_timers();
    }
    for (const auto& rank : ranks_) {
      rank->out.close();
      rank->err.close();
    }
  }

  bool any_output_open() const {
    return std::any_of(ranks_.begin(), ranks_.end(),
                       [](const auto& rank) { return rank->out.open() || rank->err.open(); });
  }

  void handle_signals() {
    signalfd_siginfo info{};
    while (::read(signals_.get(), &info, sizeof info) == sizeof info) {
      if (info.ssi_signo == SIGCHLD)
        reap_children();
      else
        interrupted(static_cast<int>(info.ssi_signo));
    }
  }

  void check_timers() {
    const auto now = Clock::now();
    if (now >= job_deadline_) {
      job_deadline_ = Clock::time_point::max();
      timed_out();
    }
    if (now >= kill_deadline_) {
      kill_deadline_ = Clock::time_point::max();
      if (running_ > 0) {
        say(ranks_phrase(running_) + " still running " + detail::format_seconds(kGracePeriod) +
            " after SIGTERM; sending SIGKILL");
        kill_running(SIGKILL);
      }
    }
  }

  // ------------------------------------------------------------------------------------------
  // Events

  void reap_children() {
    for (;;) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) return;  // 0: none has exited; -1 (ECHILD): no children left
      for (const auto& rank : ranks_)
        if (rank->pid == pid && rank->running) rank_ended(*rank, status);
    }
  }

  void rank_ended(Rank& rank, int status) {
    rank.running = false;
    --running_;
    // What the rank left behind in its process group goes with it.
    ::kill(-rank.pid, SIGKILL);
    const Ending ending = describe_status(status);
    // The others need not wait out the bootstrap timeout for a rank that will never join.
    rendezvous_->rank_exited(rank.rank, ending.description);
    if (running_ == 0) {
      // The last rank is gone: so is whatever escaped the ranks' groups (it would hold their
      // output pipes open and make the end wait).
      sweep(marker_, /*own_children=*/true, watchdog_->pid());
      output_deadline_ = Clock::now() + kOutputDrainTime;
    }
    if (ending.success || stopping_) return;
    std::string message = "rank " + std::to_string(rank.rank) + " (pid " +
                          std::to_string(rank.pid) + ") " + ending.description;
    if (running_ > 0)
      message += running_ == 1 ? "; stopping the other rank"
                               : "; stopping the other " + ranks_phrase(running_);
    say(message);
    stop(ending.exit_code, SIGTERM);
  }

  void interrupted(int signal) {
    if (stopping_) {
      say("received " + signal_name(signal) + " while stopping; killing " + ranks_phrase(running_));
      kill_running(SIGKILL);
      return;
    }
    say("received " + signal_name(signal) + "; stopping " + ranks_phrase(running_));
    stop(128 + signal, signal);
  }

  void timed_out() {
    if (stopping_) return;
    say("job did not finish within " + detail::format_seconds(*options_.timeout) + "; stopping " +
        ranks_phrase(running_));
    stop(kTimeoutExitCode, SIGTERM);
  }

  // Ends the job with `exit_code`: `signal` now to every running rank, SIGKILL after the grace
  // period.
  void stop(int exit_code, int signal) {
    stopping_ = true;
    exit_code_ = exit_code;
    kill_running(signal);
    kill_deadline_ = Clock::now() + kGracePeriod;
  }

  void kill_running(int signal) {
    for (const auto& rank : ranks_)
      if (rank->running) ::kill(-rank->pid, signal);
  }

  // Whatever is still running now (normally nothing) is killed and reaped, so that no process
  // of the job outlives iris-run.
  void end_every_process() {
    stopping_ = true;
    kill_running(SIGKILL);
    // Descendants of ranks that left their rank's process group: handed to us when their parent
    // died (we are their subreaper), or found by the job's marker in their environment.
    if (watchdog_) {
      sweep(marker_, /*own_children=*/true, watchdog_->pid());
      watchdog_->release();
    }
    reap_until_no_children(Clock::now() + kGracePeriod);
  }

  // Reaps every child (ranks and the orphans handed to us), until there are none or `until`.
  void reap_until_no_children(Clock::time_point until) {
    for (;;) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid < 0 && errno == ECHILD) return;
      if (pid > 0) {
        for (const auto& rank : ranks_)
          if (rank->pid == pid && rank->running) rank_ended(*rank, status);
        continue;
      }
      if (Clock::now() >= until) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  const Options& options_;
  sigset_t original_mask_{};
  UniqueFd signals_;
  rlimit open_files_limit_{};
  std::string endpoint_;
  std::string marker_;  // "IRIS_BOOTSTRAP=<endpoint_>": the entry every process of the job carries
  std::unique_ptr<Watchdog> watchdog_;
  std::string secret_;
  std::unique_ptr<detail::RendezvousServer> rendezvous_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  int running_ = 0;
  bool stopping_ = false;
  int exit_code_ = 0;
  Clock::time_point job_deadline_ = Clock::time_point::max();
  Clock::time_point kill_deadline_ = Clock::time_point::max();
  Clock::time_point output_deadline_ = Clock::time_point::max();
};

}  // namespace

int run_job(const Options& options) {
  return Job(options).run();
}

}  // namespace iris::run
