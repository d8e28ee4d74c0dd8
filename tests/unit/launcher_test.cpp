// iris-run, run as a program: output prefixes, failure propagation, signals, timeouts, usage
// errors, the variables ranks see, no orphans, and a rendezvous through bootstrap_from_env().
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "unit/helpers/scoped_env.hpp"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::HasSubstr;
using testing::Not;

const std::string kLauncher = IRIS_RUN_PATH;
const std::string kRank = IRIS_TEST_BINARY_DIR "/helpers/helper_launcher_rank";

struct LaunchResult {
  int exit_code = -1;  // -1 when the launcher itself was killed by a signal
  int signal = 0;
  bool killed_at_deadline = false;
  double seconds = 0;
  std::string out;
  std::string err;
};

std::ostream& operator<<(std::ostream& stream, const LaunchResult& result) {
  return stream << "exit code " << result.exit_code << ", signal " << result.signal << ", "
                << result.seconds << " s"
                << (result.killed_at_deadline ? " (killed at the deadline)" : "")
                << "\n--- stdout ---\n"
                << result.out << "--- stderr ---\n"
                << result.err;
}

bool drain(int fd, std::string& into) {  // false at end-of-file
  char buffer[4096];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got > 0)
      into.append(buffer, static_cast<std::size_t>(got));
    else
      return got < 0 && (errno == EAGAIN || errno == EINTR);
  }
}

// Runs iris-run with `args`, collecting its output. `while_running` is called every few
// milliseconds with the launcher's pid until it exits. The launcher is killed at `deadline`
// (a test failure), so no test can hang.
LaunchResult launch_program(const std::string& program, const std::vector<std::string>& args,
                            const std::function<void(pid_t)>& while_running,
                            std::chrono::seconds deadline);

LaunchResult launch(const std::vector<std::string>& args,
                    const std::function<void(pid_t)>& while_running = {},
                    std::chrono::seconds deadline = 30s) {
  return launch_program(kLauncher, args, while_running, deadline);
}

// Runs `script` with bash, with $IRIS_RUN (the launcher) and $RANK_HELPER (the helper rank) set.
LaunchResult shell(const std::string& script, std::chrono::seconds deadline = 30s) {
  iris::test::ScopedEnv env;
  env.set("IRIS_RUN", kLauncher).set("RANK_HELPER", kRank);
  return launch_program("/bin/bash", {"-c", script}, {}, deadline);
}

LaunchResult launch_program(const std::string& program, const std::vector<std::string>& args,
                            const std::function<void(pid_t)>& while_running,
                            std::chrono::seconds deadline) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe2");
  std::vector<std::string> argv_strings{program};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& text : argv_strings) argv.push_back(text.data());
  argv.push_back(nullptr);
  const auto start = Clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    ::execv(program.c_str(), argv.data());
    ::_exit(250);
  }
  ::close(out[1]);
  ::close(err[1]);
  for (const int fd : {out[0], err[0]}) ::fcntl(fd, F_SETFL, O_NONBLOCK);
  LaunchResult result;
  bool out_open = true, err_open = true, exited = false;
  Clock::time_point exited_at{};
  while (out_open || err_open || !exited) {
    pollfd fds[2] = {{out_open ? out[0] : -1, POLLIN, 0}, {err_open ? err[0] : -1, POLLIN, 0}};
    ::poll(fds, 2, 10);
    if (out_open) out_open = drain(out[0], result.out);
    if (err_open) err_open = drain(err[0], result.err);
    int status = 0;
    if (!exited && ::waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      exited_at = Clock::now();
      result.seconds = std::chrono::duration<double>(exited_at - start).count();
      result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      result.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    }
    if (!exited && while_running) while_running(pid);
    if (!exited && Clock::now() - start > deadline) {
      ::kill(pid, SIGKILL);
      result.killed_at_deadline = true;
    }
    if (exited && Clock::now() - exited_at > 5s) break;  // a survivor holds the pipes open
  }
  ::close(out[0]);
  ::close(err[0]);
  return result;
}

// A directory where the helper ranks record their pids (IRIS_TEST_PID_DIR), removed afterwards.
class PidDirectory {
 public:
  PidDirectory() {
    std::string pattern = testing::TempDir() + "iris-run-test-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp");
    path_ = pattern;
    env_.set("IRIS_TEST_PID_DIR", path_);
  }
  ~PidDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }

  std::vector<pid_t> pids() const {
    std::vector<pid_t> pids;
    for (const auto& entry : std::filesystem::directory_iterator(path_))
      pids.push_back(std::stoi(entry.path().filename().string()));
    return pids;
  }

  // Waits (bounded) until `count` processes have recorded themselves.
  bool wait_for(std::size_t count) const {
    const auto until = Clock::now() + 20s;
    while (pids().size() < count) {
      if (Clock::now() > until) return false;
      std::this_thread::sleep_for(5ms);
    }
    return true;
  }

 private:
  std::string path_;
  iris::test::ScopedEnv env_;
};

// True while `pid` is a running helper (not gone, not a zombie, not a reused pid).
bool helper_alive(pid_t pid) {
  const std::string proc = "/proc/" + std::to_string(pid);
  std::ifstream stat_file(proc + "/stat");
  std::string stat;
  if (!std::getline(stat_file, stat)) return false;
  const auto close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] == 'Z')
    return false;
  std::ifstream cmdline(proc + "/cmdline");
  const std::string command((std::istreambuf_iterator<char>(cmdline)),
                            std::istreambuf_iterator<char>());
  return command.find("helper_launcher_rank") != std::string::npos;
}

// Expects every recorded process to be gone; the kernel may need a moment to finish a SIGKILL.
void expect_no_survivors(const PidDirectory& directory, std::size_t expected_count) {
  const std::vector<pid_t> pids = directory.pids();
  EXPECT_EQ(pids.size(), expected_count);
  const auto until = Clock::now() + 5s;
  for (const pid_t pid : pids) {
    while (helper_alive(pid) && Clock::now() < until) std::this_thread::sleep_for(10ms);
    EXPECT_FALSE(helper_alive(pid)) << "process " << pid << " outlived iris-run";
  }
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t newline; (newline = text.find('\n', start)) != std::string::npos;
       start = newline + 1)
    lines.push_back(text.substr(start, newline - start));
  if (start < text.size()) lines.push_back(text.substr(start));
  return lines;
}

// ---------------------------------------------------------------------------------------------
// Usage

TEST(Launcher, PrintsHelp) {
  const LaunchResult result = launch({"--help"});
  EXPECT_EQ(result.exit_code, 0) << result;
  EXPECT_THAT(result.out, HasSubstr("usage: iris-run -n N")) << result;
}

TEST(Launcher, ExplainsBadUsage) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{kRank, "print"}, "missing -n"},
      {{"-n", "0", kRank}, "-n must be at least 1, not 0"},
      {{"-n", "two", kRank}, "-n expects a number of ranks, not 'two'"},
      {{"-n"}, "-n needs a value"},
      {{"-n", "2"}, "no program to run"},
      {{"-n", "2", "--timeout", "soon", kRank}, "--timeout: cannot parse 'soon'"},
      {{"-n", "2", "--timeout", "0x10", kRank}, "--timeout: cannot parse '0x10'"},
      {{"-n", "2", "--timeout", "1e10", kRank}, "--timeout: cannot parse '1e10'"},
      {{"-n", "100000", kRank},
       "-n 100000 is more ranks than iris-run starts on one host (at most 4096)"},
      {{"-n", "99999999999", kRank}, "-n 99999999999 is more ranks than iris-run starts"},
      {{"-n", "2", "--timeout=0", kRank}, "--timeout must be more than 0 seconds"},
      {{"-n", "2", "--gpus", "0,,1", kRank}, "--gpus expects device ordinals"},
      {{"-n", "2", "--frobnicate", kRank}, "unknown option '--frobnicate'"},
  };
  for (const auto& [args, message] : cases) {
    const LaunchResult result = launch(args);
    EXPECT_EQ(result.exit_code, 2) << result;
    EXPECT_THAT(result.err, HasSubstr("iris-run: " + message)) << result;
  }
}

TEST(Launcher, ReportsAProgramThatCannotRun) {
  LaunchResult result = launch({"-n", "2", "--", "no-such-program-for-iris-run"});
  EXPECT_EQ(result.exit_code, 127) << result;
  EXPECT_THAT(
      result.err,
      HasSubstr(
          "iris-run: cannot execute 'no-such-program-for-iris-run': No such file or directory"))
      << result;

  const std::string not_executable = testing::TempDir() + "iris-run-not-executable";
  std::ofstream(not_executable) << "data\n";
  ::chmod(not_executable.c_str(), 0644);
  result = launch({"-n", "2", not_executable});
  EXPECT_EQ(result.exit_code, 126) << result;
  EXPECT_THAT(result.err, HasSubstr("cannot execute '" + not_executable + "': Permission denied"))
      << result;
  std::filesystem::remove(not_executable);
}

// ---------------------------------------------------------------------------------------------
// Running ranks

TEST(Launcher, PrefixesEveryLineWithItsRank) {
  const LaunchResult result = launch({"-n", "3", "--", kRank, "print"});
  ASSERT_EQ(result.exit_code, 0) << result;
  const auto out = lines_of(result.out);
  const auto err = lines_of(result.err);
  for (int rank = 0; rank < 3; ++rank) {
    const std::string prefix = "[rank " + std::to_string(rank) + "] ";
    EXPECT_THAT(out, testing::Contains(prefix + "out line from rank " + std::to_string(rank)))
        << result;
    EXPECT_THAT(out, testing::Contains(prefix + "partial line from rank " + std::to_string(rank)))
        << result;
    EXPECT_THAT(err, testing::Contains(prefix + "err line from rank " + std::to_string(rank)))
        << result;
  }
  EXPECT_EQ(out.size(), 6u) << result;
  EXPECT_EQ(err.size(), 3u) << result;
}

TEST(Launcher, GivesEachRankItsVariables) {
  iris::test::ScopedEnv env;
  env.unset("IRIS_DEVICE");
  const LaunchResult with_gpus = launch({"-n", "3", "--gpus", "5,7", kRank, "env"});
  ASSERT_EQ(with_gpus.exit_code, 0) << with_gpus;
  const auto lines = lines_of(with_gpus.out);
  const auto has = [&](int rank, const std::string& setting) {
    return std::find(lines.begin(), lines.end(),
                     "[rank " + std::to_string(rank) + "] " + setting) != lines.end();
  };
  const int devices[] = {5, 7, 5};
  std::string secret;
  for (int rank = 0; rank < 3; ++rank) {
    const std::string r = std::to_string(rank);
    EXPECT_TRUE(has(rank, "IRIS_RANK=" + r)) << with_gpus;
    EXPECT_TRUE(has(rank, "IRIS_WORLD_SIZE=3")) << with_gpus;
    EXPECT_TRUE(has(rank, "IRIS_LOCAL_RANK=" + r)) << with_gpus;
    EXPECT_TRUE(has(rank, "IRIS_LOCAL_WORLD_SIZE=3")) << with_gpus;
    EXPECT_TRUE(has(rank, "IRIS_DEVICE=" + std::to_string(devices[rank]))) << with_gpus;
  }
  EXPECT_THAT(with_gpus.out, testing::ContainsRegex(
                                 "\\[rank 0\\] IRIS_BOOTSTRAP=unix:@iris-run-[0-9]+-[0-9a-f]+"));
  EXPECT_THAT(with_gpus.out, testing::ContainsRegex("\\[rank 0\\] IRIS_JOB_SECRET=[0-9a-f]{32}\n"));

  const LaunchResult without_gpus = launch({"-n", "1", kRank, "env"});
  EXPECT_THAT(without_gpus.out, HasSubstr("[rank 0] IRIS_DEVICE=(unset)")) << without_gpus;
  // Each job has its own secret.
  const auto secret_of = [](const std::string& out) {
    return out.substr(out.find("IRIS_JOB_SECRET="));
  };
  EXPECT_NE(secret_of(with_gpus.out), secret_of(without_gpus.out));
}

TEST(Launcher, ExitsWithTheCodeAllRanksShare) {
  EXPECT_EQ(launch({"-n", "3", kRank, "exit-all", "0"}).exit_code, 0);
  EXPECT_EQ(launch({"-n", "3", kRank, "exit-all", "77"}).exit_code, 77);
}

TEST(Launcher, RanksRendezvousThroughBootstrapFromEnv) {
  const LaunchResult result = launch({"-n", "4", "--timeout", "60", kRank, "allgather"});
  ASSERT_EQ(result.exit_code, 0) << result;
  const auto lines = lines_of(result.out);
  for (int rank = 0; rank < 4; ++rank) {
    const std::string line =
        "[rank " + std::to_string(rank) + "] rank " + std::to_string(rank) + " saw 0 1 2 3";
    EXPECT_EQ(std::count(lines.begin(), lines.end(), line), 2) << result;  // one per bootstrap
  }
}

// ---------------------------------------------------------------------------------------------
// Failures

TEST(Launcher, OneFailingRankStopsTheOthers) {
  PidDirectory pids;
  const LaunchResult result = launch({"-n", "4", kRank, "exit", "2", "3"});
  EXPECT_EQ(result.exit_code, 3) << result;
  EXPECT_LT(result.seconds, 5.0) << result;
  EXPECT_THAT(result.err,
              testing::ContainsRegex("iris-run: rank 2 \\(pid [0-9]+\\) exited with code 3; "
                                     "stopping the other 3 ranks"))
      << result;
  expect_no_survivors(pids, 4);
}

TEST(Launcher, ARankKilledBySegfaultIsNamed) {
  PidDirectory pids;
  const LaunchResult result = launch({"-n", "3", kRank, "signal", "1", "11"});
  EXPECT_EQ(result.exit_code, 128 + 11) << result;
  EXPECT_LT(result.seconds, 5.0) << result;
  EXPECT_THAT(result.err,
              testing::ContainsRegex("iris-run: rank 1 \\(pid [0-9]+\\) was killed by signal 11 "
                                     "\\(Segmentation fault\\); stopping the other 2 ranks"))
      << result;
  expect_no_survivors(pids, 3);
}

TEST(Launcher, ARankKilledBySigkillIsNamed) {
  PidDirectory pids;
  const LaunchResult result = launch({"-n", "2", kRank, "signal", "0", "9"});
  EXPECT_EQ(result.exit_code, 128 + 9) << result;
  EXPECT_THAT(result.err, HasSubstr("was killed by signal 9 (Killed); stopping the other rank"))
      << result;
  expect_no_survivors(pids, 2);
}

TEST(Launcher, ARankLeavingTheRendezvousFailsTheJob) {
  const LaunchResult result =
      launch({"-n", "3", "--timeout", "60", kRank, "leave-before-allgather", "1"});
  EXPECT_EQ(result.exit_code, 5) << result;
  EXPECT_LT(result.seconds, 10.0) << result;
  EXPECT_THAT(result.err,
              testing::ContainsRegex("iris-run: rank 1 \\(pid [0-9]+\\) exited with code 5"))
      << result;
}

TEST(Launcher, TimeoutStopsAHungJob) {
  PidDirectory pids;
  const LaunchResult result = launch({"-n", "2", "--timeout", "0.5", kRank, "hang"});
  EXPECT_EQ(result.exit_code, 124) << result;
  EXPECT_LT(result.seconds, 5.0) << result;
  EXPECT_THAT(result.err, HasSubstr("iris-run: job did not finish within 0.5 s; stopping 2 ranks"))
      << result;
  expect_no_survivors(pids, 2);
}

TEST(Launcher, RanksIgnoringSigtermAreKilled) {
  PidDirectory pids;
  const LaunchResult result =
      launch({"-n", "2", "--timeout", "0.3", kRank, "hang-ignoring-sigterm"});
  EXPECT_EQ(result.exit_code, 124) << result;
  EXPECT_LT(result.seconds, 10.0) << result;
  EXPECT_THAT(result.err, HasSubstr("2 ranks still running 3 s after SIGTERM; sending SIGKILL"))
      << result;
  expect_no_survivors(pids, 2);
}

TEST(Launcher, ChildrenOfRanksDieWithTheJob) {
  PidDirectory pids;
  const LaunchResult result = launch({"-n", "2", "--timeout", "0.5", kRank, "hang-with-child"});
  EXPECT_EQ(result.exit_code, 124) << result;
  expect_no_survivors(pids, 4);
}

TEST(Launcher, ForwardsCtrlCToEveryRank) {
  PidDirectory pids;
  bool interrupted = false;
  const LaunchResult result = launch({"-n", "3", kRank, "hang"}, [&](pid_t launcher) {
    if (!interrupted && pids.pids().size() == 3) {
      ::kill(launcher, SIGINT);
      interrupted = true;
    }
  });
  EXPECT_TRUE(interrupted);
  EXPECT_EQ(result.exit_code, 128 + SIGINT) << result;
  EXPECT_LT(result.seconds, 10.0) << result;
  EXPECT_THAT(result.err, HasSubstr("iris-run: received SIGINT; stopping 3 ranks")) << result;
  expect_no_survivors(pids, 3);
}

TEST(Launcher, RanksDieWhenTheLauncherIsKilled) {
  PidDirectory pids;
  bool killed = false;
  const LaunchResult result = launch({"-n", "2", kRank, "hang"}, [&](pid_t launcher) {
    if (!killed && pids.pids().size() == 2) {
      ::kill(launcher, SIGKILL);
      killed = true;
    }
  });
  EXPECT_EQ(result.signal, SIGKILL) << result;
  expect_no_survivors(pids, 2);
}

// ---------------------------------------------------------------------------------------------
// Hardening (issue 12): limits, output problems, leftovers, messages

TEST(Launcher, ChecksTheOpenFilesLimitBeforeStartingAnything) {
  PidDirectory pids;
  // 100 ranks need about 464 descriptors; a hard limit of 64 cannot give them.
  const LaunchResult result =
      shell("ulimit -n 64 && exec \"$IRIS_RUN\" -n 100 \"$RANK_HELPER\" hang");
  EXPECT_EQ(result.exit_code, 1) << result;
  EXPECT_THAT(result.err, HasSubstr("-n 100 needs about 464 open files")) << result;
  EXPECT_THAT(result.err, HasSubstr("at most 64 (ulimit -n)")) << result;
  EXPECT_LT(result.seconds, 5.0) << result;
  EXPECT_TRUE(pids.pids().empty()) << "a rank was started";
}

TEST(Launcher, RaisesItsSoftOpenFilesLimitButNotTheRanks) {
  // Soft 64, hard 4096: iris-run raises its own soft limit for 20 ranks' pipes; the ranks
  // still see 64.
  const LaunchResult result = shell(
      "ulimit -Sn 64 && ulimit -Hn 4096 && exec \"$IRIS_RUN\" -n 20 -- /bin/sh -c 'ulimit -Sn'");
  EXPECT_EQ(result.exit_code, 0) << result;
  EXPECT_THAT(result.out, HasSubstr("[rank 19] 64")) << result;
}

TEST(Launcher, SurvivesAClosedStderr) {
  LaunchResult result =
      shell("\"$IRIS_RUN\" -n 2 \"$RANK_HELPER\" print-many 3 2>&-; echo \"exit=$?\"");
  EXPECT_THAT(result.out, HasSubstr("[rank 1] stdout line 2")) << result;
  EXPECT_THAT(result.out, HasSubstr("exit=0")) << result;
  result = shell("\"$IRIS_RUN\" -n 2 \"$RANK_HELPER\" allgather 2>&-; echo \"exit=$?\"");
  EXPECT_THAT(result.out, HasSubstr("[rank 0] rank 0 saw 0 1")) << result;
  EXPECT_THAT(result.out, HasSubstr("exit=0")) << result;
  // A failing rank's code still comes through.
  result = shell("\"$IRIS_RUN\" -n 2 \"$RANK_HELPER\" exit 1 3 2>&-; echo \"exit=$?\"");
  EXPECT_THAT(result.out, HasSubstr("exit=3")) << result;
}

TEST(Launcher, SurvivesAClosedStdoutAndSaysSo) {
  const LaunchResult result =
      shell("\"$IRIS_RUN\" -n 2 \"$RANK_HELPER\" print-many 100 >&-; echo \"exit=$?\" >&2");
  EXPECT_THAT(result.err, HasSubstr("exit=0")) << result;
  EXPECT_THAT(result.err, HasSubstr("iris-run: stdout is closed")) << result;
  EXPECT_THAT(result.err, HasSubstr("[rank 1] stderr line 99")) << result;
}

TEST(Launcher, AFullDiskDropsOutputButTheJobRunsOn) {
  const LaunchResult result =
      shell("\"$IRIS_RUN\" -n 2 \"$RANK_HELPER\" print-many 2000 >/dev/full; echo \"exit=$?\" >&2");
  EXPECT_THAT(result.err, HasSubstr("exit=0")) << result;
  EXPECT_THAT(result.err, HasSubstr("[rank 1] stderr line 1999")) << result;
  const std::string notice = "iris-run: cannot write to stdout";
  EXPECT_THAT(result.err, HasSubstr(notice + " (write(): No space left on device)")) << result;
  EXPECT_EQ(result.err.find(notice), result.err.rfind(notice)) << "said more than once\n" << result;
}

TEST(Launcher, ALineLongerThan64KiBIsCutIntoPrefixedPieces) {
  const LaunchResult result = launch({"-n", "1", kRank, "long-line", "150000"});
  EXPECT_EQ(result.exit_code, 0) << result;
  const auto lines = lines_of(result.out);
  ASSERT_EQ(lines.size(), 3u);
  std::string joined;
  for (const auto& line : lines) {
    ASSERT_TRUE(line.starts_with("[rank 0] "));
    joined += line.substr(9);
  }
  EXPECT_EQ(joined, std::string(150000, 'x'));
  EXPECT_THAT(launch({"--help"}).out, HasSubstr("longer than 64 KiB"));
}

TEST(Launcher, ABadInterpreterLineIsNamed) {
  const std::string script = testing::TempDir() + "iris-run-bad-interpreter.sh";
  {
    std::ofstream file(script);
    file << "#!/no/such/interpreter -x\necho hello\n";
  }
  ::chmod(script.c_str(), 0755);
  const LaunchResult result = launch({"-n", "2", script});
  EXPECT_EQ(result.exit_code, 126) << result;
  EXPECT_THAT(result.err, HasSubstr("its #! line names the interpreter '/no/such/interpreter', "
                                    "which does not exist"))
      << result;
  std::filesystem::remove(script);
}

TEST(Launcher, ARankThatExitsBeforeJoiningFailsTheOthersAtOnce) {
  iris::test::ScopedEnv env;
  env.set("IRIS_BOOTSTRAP_TIMEOUT", "60");
  const LaunchResult result = launch({"-n", "3", kRank, "exit-early", "1"});
  EXPECT_EQ(result.exit_code, 3) << result;
  EXPECT_LT(result.seconds, 10.0) << result;  // not the 60 s bootstrap timeout
  EXPECT_THAT(result.err,
              HasSubstr("rank 1 exited with code 0 without joining the job's rendezvous"))
      << result;
}

TEST(Launcher, ASetsidGrandchildDiesAtANormalEndWithoutDelay) {
  PidDirectory pids;
  const LaunchResult result = launch({"-n", "2", kRank, "setsid-grandchild"});
  EXPECT_EQ(result.exit_code, 0) << result;
  EXPECT_LT(result.seconds, 1.5) << result;  // no drain wait for the grandchildren's pipes
  expect_no_survivors(pids, 4);
}

TEST(Launcher, AWrapperScriptsChildrenDieWhenTheLauncherIsKilled) {
  PidDirectory pids;
  bool killed = false;
  const LaunchResult result = launch({"-n", "2", kRank, "hang-with-child"}, [&](pid_t launcher) {
    if (!killed && pids.pids().size() == 4) {
      ::kill(launcher, SIGKILL);
      killed = true;
    }
  });
  EXPECT_TRUE(killed);
  EXPECT_EQ(result.signal, SIGKILL) << result;
  expect_no_survivors(pids, 4);
}

TEST(Launcher, ASetsidGrandchildDiesWhenTheLauncherIsKilled) {
  PidDirectory pids;
  bool killed = false;
  const LaunchResult result =
      launch({"-n", "2", kRank, "setsid-grandchild-hang"}, [&](pid_t launcher) {
        if (!killed && pids.pids().size() == 4) {
          ::kill(launcher, SIGKILL);
          killed = true;
        }
      });
  EXPECT_TRUE(killed);
  expect_no_survivors(pids, 4);
}

TEST(Launcher, HelpSaysWhatIsPromised) {
  const std::string help = launch({"--help"}).out;
  EXPECT_THAT(help, HasSubstr("watchdog"));
  EXPECT_THAT(help, HasSubstr("subreaper"));
  EXPECT_THAT(help, HasSubstr("1 to 4096"));
}

// ---------------------------------------------------------------------------------------------
// The environment, checked before any CUDA call (a real process without a GPU)

TEST(Environment, BadValuesAreNamedBeforeAnyCudaCall) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"IRIS_HEAP_SIZE=abc", "IRIS_HEAP_SIZE: cannot parse 'abc'"},
      {"IRIS_HEAP_SIZE=-1", "IRIS_HEAP_SIZE: cannot parse '-1'"},
      {"IRIS_HEAP_SIZE=0", "IRIS_HEAP_SIZE='0' is not a heap size"},
      {"IRIS_HEAP_SIZE=1e30", "IRIS_HEAP_SIZE: cannot parse '1e30'"},
      {"IRIS_HEAP_SIZE=1bb", "IRIS_HEAP_SIZE: cannot parse '1bb'"},
      {"IRIS_HEAP_SIZE=1000", "leaves no room"},
      {"IRIS_WAIT_TIMEOUT=-1", "IRIS_WAIT_TIMEOUT: cannot parse '-1'"},
      {"IRIS_WAIT_TIMEOUT=1e10", "IRIS_WAIT_TIMEOUT: cannot parse '1e10'"},
      {"IRIS_WAIT_TIMEOUT=0x10", "IRIS_WAIT_TIMEOUT: cannot parse '0x10'"},
      {"IRIS_BOOTSTRAP_TIMEOUT=1e30", "IRIS_BOOTSTRAP_TIMEOUT: cannot parse '1e30'"},
      {"IRIS_BOOTSTRAP_TIMEOUT=0", "IRIS_BOOTSTRAP_TIMEOUT='0' is not a bootstrap timeout"},
      {"IRIS_DEVICE=-1", "IRIS_DEVICE='-1' is out of range"},
      {"IRIS_DEVICE=gpu0", "IRIS_DEVICE='gpu0' is not a CUDA device ordinal"},
      {"IRIS_HEAP_TRANSPORT=nvlink", "IRIS_HEAP_TRANSPORT='nvlink' is not one of auto, vmm, ipc"},
      {"IRIS_DEBUG_CHECKS=maybe", "IRIS_DEBUG_CHECKS: cannot parse 'maybe'"},
      {"IRIS_BOOTSTRAP_PORT=70000", "IRIS_BOOTSTRAP_PORT='70000' is out of range"},
      {"RANK=1", "RANK is set but WORLD_SIZE is not"},
      {"WORLD_SIZE=4", "WORLD_SIZE is set but RANK is not"},
      {"IRIS_RANK=1", "IRIS_RANK is set but IRIS_WORLD_SIZE is not"},
      {"IRIS_RANK=1 IRIS_WORLD_SIZE=2",
       "IRIS_RANK and IRIS_WORLD_SIZE are set but IRIS_BOOTSTRAP is not"},
      {"OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK is not"},
      {"RANK=5 WORLD_SIZE=2", "RANK=5 is out of range for WORLD_SIZE=2"},
  };
  for (const auto& [settings, message] : cases) {
    const LaunchResult result =
        shell("env -u IRIS_RANK -u RANK -u WORLD_SIZE " + settings + " \"$RANK_HELPER\" context");
    EXPECT_EQ(result.exit_code, 2) << settings << "\n" << result;
    EXPECT_THAT(result.out, HasSubstr("context: invalid argument: ")) << settings << "\n" << result;
    EXPECT_THAT(result.out, HasSubstr(message)) << settings << "\n" << result;
  }
}

TEST(Environment, NoGpuIsItsOwnErrorAndExitCode) {
  const LaunchResult result = shell("\"$RANK_HELPER\" context");
  if (result.exit_code == 0) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_EQ(result.exit_code, 77) << result;
  EXPECT_THAT(result.out, HasSubstr("context: no device: rank 0 sees no CUDA device")) << result;
}

TEST(Environment, LogLevelIsCaseInsensitiveAndABadOneWarnsAtOnce) {
  LaunchResult result = shell("IRIS_LOG_LEVEL=bogus \"$RANK_HELPER\" context");
  EXPECT_THAT(result.err, HasSubstr("IRIS_LOG_LEVEL='bogus' is not one of")) << result;
  result = shell("IRIS_LOG_LEVEL=INFO IRIS_HEAP_SIZE=abc \"$RANK_HELPER\" context");
  EXPECT_THAT(result.err, Not(HasSubstr("IRIS_LOG_LEVEL"))) << result;
  result = shell("IRIS_LOG_LEVEL=ERROR \"$RANK_HELPER\" log-warning");
  EXPECT_THAT(result.err, Not(HasSubstr("a warning from the helper"))) << result;
}

TEST(Environment, LogLinesCarryTheRankUnderOtherLaunchers) {
  for (const char* variable : {"RANK=3 WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=3", "PMI_RANK=3"}) {
    const LaunchResult result =
        shell(std::string("env -u IRIS_RANK ") + variable + " \"$RANK_HELPER\" log-warning");
    EXPECT_THAT(result.err, HasSubstr("iris warn [rank 3]: a warning from the helper"))
        << variable << "\n"
        << result;
  }
}

TEST(Environment, ARendezvousThatCannotTellJobsApartWarns) {
  const std::string unset =
      "env -u IRIS_RANK -u IRIS_BOOTSTRAP -u IRIS_JOB_SECRET -u MASTER_PORT -u TORCHELASTIC_RUN_ID "
      "-u OMPI_MCA_ess_base_jobid -u PMIX_NAMESPACE -u SLURM_JOB_ID ";
  LaunchResult result = shell(unset +
                              "RANK=1 WORLD_SIZE=2 IRIS_BOOTSTRAP_PORT=1 "
                              "IRIS_BOOTSTRAP_TIMEOUT=0.2 \"$RANK_HELPER\" allgather");
  EXPECT_THAT(result.err, HasSubstr("nothing that tells this job from another")) << result;
  // torchrun's default id is no id, but its store's port tells jobs apart: no warning.
  result = shell(unset +
                 "RANK=1 WORLD_SIZE=2 IRIS_BOOTSTRAP_PORT=1 TORCHELASTIC_RUN_ID=none "
                 "MASTER_PORT=29500 IRIS_BOOTSTRAP_TIMEOUT=0.2 \"$RANK_HELPER\" allgather");
  EXPECT_THAT(result.err, Not(HasSubstr("nothing that tells this job from another"))) << result;
  EXPECT_THAT(result.err, HasSubstr("could not connect to the rendezvous")) << result;
}

}  // namespace
