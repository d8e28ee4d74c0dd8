// A rank program for the iris-run tests: one mode per behaviour a launcher must handle.
//
//   helper_launcher_rank MODE [ARGS]
//     print                      a stdout line, a stderr line, then a last line without newline
//     env                        the IRIS_* variables iris-run sets, one NAME=value per line
//     exit RANK CODE             rank RANK exits with CODE after 100 ms; the others hang
//     exit-all CODE              every rank exits with CODE
//     signal RANK SIGNAL         rank RANK kills itself with SIGNAL after 100 ms; the others hang
//     hang                       every rank hangs
//     hang-ignoring-sigterm      every rank ignores SIGTERM and hangs
//     hang-with-child            every rank starts a child process; both hang
//     allgather                  twice: bootstrap_from_env(), allgather, broadcast, barrier
//     leave-before-allgather R   rank R exits with 5 right after joining the rendezvous; the
//                                others report what the allgather says, then exit 1
//     exit-early R               rank R exits with 0 without joining; the others join and
//                                report what the barrier says ("barrier failed: ..."), exit 3
//     print-many N               N numbered lines on stdout and N on stderr, then exit 0
//     long-line BYTES            one stdout line of BYTES 'x's, then exit 0
//     setsid-grandchild          a grandchild in a session of its own (setsid, double fork)
//                                that hangs holding the rank's output; the rank exits 0
//     setsid-grandchild-hang     the same, and the rank hangs too
//     log-warning                writes one warning through Iris's log, then exits 0
//     context                    Context::from_env(); on an iris::Error prints "context: <code>:
//                                <message>" and exits with examples/common/exit_codes.hpp's code
//
// When IRIS_TEST_PID_DIR is set, every process writes a file named after its pid there first,
// so that a test can wait until all have started and check afterwards that none survived.
// "Hanging" lasts at most a minute, so that even a broken launcher leaves nothing for long.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>

#include "../../../examples/common/exit_codes.hpp"
#include "detail/log.hpp"
#include "iris/host/bootstrap.hpp"
#include "iris/host/context.hpp"
#include "iris/host/error.hpp"

namespace {

int my_rank() {
  const char* rank = std::getenv("IRIS_RANK");
  return rank != nullptr ? std::atoi(rank) : -1;
}

void record_pid(const std::string& role) {
  const char* directory = std::getenv("IRIS_TEST_PID_DIR");
  if (directory == nullptr) return;
  const std::string path = std::string(directory) + "/" + std::to_string(::getpid());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  (void)!::write(fd, role.data(), role.size());
  ::close(fd);
}

[[noreturn]] void hang() {
  std::this_thread::sleep_for(std::chrono::minutes(1));
  std::_Exit(99);
}

[[noreturn]] void die_by_signal(int signal) {
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);  // a test's crash must not leave a core file behind
  ::signal(signal, SIG_DFL);
  ::raise(signal);
  std::_Exit(98);
}

int print_lines() {
  const int rank = my_rank();
  std::printf("out line from rank %d\n", rank);
  std::fflush(stdout);
  std::fprintf(stderr, "err line from rank %d\n", rank);
  std::printf("partial line from rank %d", rank);
  return 0;
}

int print_environment() {
  for (const char* name :
       {"IRIS_RANK", "IRIS_WORLD_SIZE", "IRIS_LOCAL_RANK", "IRIS_LOCAL_WORLD_SIZE", "IRIS_DEVICE",
        "IRIS_BOOTSTRAP", "IRIS_JOB_SECRET"}) {
    const char* value = std::getenv(name);
    std::printf("%s=%s\n", name, value != nullptr ? value : "(unset)");
  }
  return 0;
}

int allgather_once() {
  const auto bootstrap = iris::bootstrap_from_env();
  const int rank = bootstrap->rank();
  std::vector<int> all(static_cast<std::size_t>(bootstrap->world_size()));
  bootstrap->allgather(&rank, all.data(), sizeof rank);
  std::string seen;
  for (const int value : all) seen += " " + std::to_string(value);
  std::printf("rank %d saw%s\n", rank, seen.c_str());
  int value = rank == 0 ? 1234 : 0;
  bootstrap->broadcast(&value, sizeof value, 0);
  bootstrap->barrier();
  if (value != 1234) {
    std::fprintf(stderr, "broadcast gave %d\n", value);
    return 1;
  }
  return iris::ranks_on_this_host(*bootstrap).size() == all.size() ? 0 : 1;
}

// Twice, as a program that creates a second Context after the first.
int allgather() {
  const int first = allgather_once();
  return first != 0 ? first : allgather_once();
}

int leave_before_allgather(int leaving_rank) {
  const auto bootstrap = iris::bootstrap_from_env();
  if (bootstrap->rank() == leaving_rank) return 5;
  try {
    int value = 0;
    std::vector<int> all(static_cast<std::size_t>(bootstrap->world_size()));
    bootstrap->allgather(&value, all.data(), sizeof value);
  } catch (const iris::Error& error) {
    std::fprintf(stderr, "allgather failed: %s\n", error.message().c_str());
  }
  // Long enough that the launcher has surely seen the leaving rank's exit first.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  return 1;
}

int exit_early(int leaving_rank) {
  if (my_rank() == leaving_rank) return 0;
  try {
    const auto bootstrap = iris::bootstrap_from_env();
    bootstrap->barrier();
  } catch (const iris::Error& error) {
    std::fprintf(stderr, "barrier failed: %s\n", error.message().c_str());
    return 3;
  }
  return 0;
}

int print_many(int count) {
  for (int i = 0; i < count; ++i) {
    std::printf("stdout line %d\n", i);
    std::fprintf(stderr, "stderr line %d\n", i);
  }
  return 0;
}

// A grandchild that leaves the rank's process group and session and keeps its output open.
void start_setsid_grandchild() {
  const pid_t child = ::fork();
  if (child == 0) {
    ::setsid();
    if (::fork() == 0) {
      record_pid("grandchild");
      hang();
    }
    std::_Exit(0);
  }
  ::waitpid(child, nullptr, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the grandchild has started
}

int context() {
  try {
    auto ctx = iris::Context::from_env();
    std::printf("context: rank %d of %d\n", ctx.rank(), ctx.world_size());
    return 0;
  } catch (const iris::Error& error) {
    std::printf("context: %s: %s\n", std::string(iris::to_string(error.code())).c_str(),
                error.message().c_str());
    return iris::examples::exit_code(error);
  }
}

int run(const std::vector<std::string>& args) {
  const std::string mode = args.empty() ? "" : args[0];
  const int rank = my_rank();
  const auto number = [&](std::size_t index) {
    return index < args.size() ? std::stoi(args[index]) : -1;
  };
  if (mode == "print") return print_lines();
  if (mode == "env") return print_environment();
  if (mode == "allgather") return allgather();
  if (mode == "leave-before-allgather") return leave_before_allgather(number(1));
  if (mode == "exit-all") return number(1);
  if (mode == "exit-early") return exit_early(number(1));
  if (mode == "print-many") return print_many(number(1));
  if (mode == "long-line") {
    std::printf("%s\n", std::string(static_cast<std::size_t>(number(1)), 'x').c_str());
    return 0;
  }
  if (mode == "log-warning") {
    iris::detail::log(iris::detail::LogLevel::kWarn, "a warning from the helper");
    return 0;
  }
  if (mode == "context") return context();
  if (mode == "setsid-grandchild" || mode == "setsid-grandchild-hang") {
    record_pid("rank " + std::to_string(rank));
    start_setsid_grandchild();
    if (mode == "setsid-grandchild") return 0;
    hang();
  }
  record_pid("rank " + std::to_string(rank));
  if (mode == "exit" || mode == "signal") {
    if (rank != number(1)) hang();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (mode == "exit") return number(2);
    die_by_signal(number(2));
  }
  if (mode == "hang-ignoring-sigterm") ::signal(SIGTERM, SIG_IGN);
  if (mode == "hang-with-child" && ::fork() == 0)
    record_pid("child of rank " + std::to_string(rank));
  if (mode == "hang" || mode == "hang-ignoring-sigterm" || mode == "hang-with-child") hang();
  std::fprintf(stderr, "helper_launcher_rank: unknown mode '%s'\n", mode.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception& error) {
    std::fprintf(stderr, "helper_launcher_rank: %s\n", error.what());
    return 1;
  }
}
