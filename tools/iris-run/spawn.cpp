#include "spawn.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "iris/host/error.hpp"

namespace iris::run {
namespace {

using detail::UniqueFd;

// How long the launcher waits for a forked child to reach exec(). Nothing in between can block,
// so this only bounds the impossible.
constexpr int kExecWaitMs = 30'000;

[[noreturn]] void cannot_execute(const std::string& program, int error, int exit_code) {
  throw LaunchError("cannot execute '" + program + "': " + std::strerror(error), exit_code);
}

// 0 when `path` is an executable regular file, else the errno execve() would report.
int executable_error(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return errno;
  if (!S_ISREG(info.st_mode)) return EACCES;
  return ::access(path.c_str(), X_OK) == 0 ? 0 : errno;
}

struct Pipe {
  UniqueFd reader;
  UniqueFd writer;
};

Pipe make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) detail::throw_system_error(errno, "pipe2()");
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (const std::string& text : strings) pointers.push_back(const_cast<char*>(text.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

// The child between fork() and exec(): async-signal-safe calls only. On failure it reports
// errno through `exec_status` and exits 127; on success exec closes `exec_status` (O_CLOEXEC),
// which the parent reads as end-of-file.
[[noreturn]] void become_rank(const SpawnRequest& request, pid_t launcher, int stdin_fd,
                              int stdout_fd, int stderr_fd, int exec_status, char* const* argv,
                              char* const* envp) {
  ::setpgid(0, 0);
  // If iris-run dies (even by SIGKILL), the kernel kills the rank. The check after the prctl
  // catches a launcher that died before it.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != launcher) ::_exit(127);
  if (::dup2(stdin_fd, STDIN_FILENO) < 0 || ::dup2(stdout_fd, STDOUT_FILENO) < 0 ||
      ::dup2(stderr_fd, STDERR_FILENO) < 0) {
    const int error = errno;
    (void)!::write(exec_status, &error, sizeof error);
    ::_exit(127);
  }
  for (int signal = 1; signal < NSIG; ++signal) ::signal(signal, SIG_DFL);
  // The launcher may have raised its own open-files limit for the job's pipes; the rank gets
  // the limit iris-run was started with.
  if (request.open_files_limit.rlim_cur != 0) ::setrlimit(RLIMIT_NOFILE, &request.open_files_limit);
  ::sigprocmask(SIG_SETMASK, &request.signal_mask, nullptr);
  ::execve(request.path.c_str(), argv, envp);
  const int error = errno;
  (void)!::write(exec_status, &error, sizeof error);
  ::_exit(127);
}

// Reads the child's exec status: 0 once exec succeeded, else the errno of the failure.
int wait_for_exec(int exec_status) {
  for (;;) {
    pollfd entry{exec_status, POLLIN, 0};
    const int ready = ::poll(&entry, 1, kExecWaitMs);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return ETIMEDOUT;
    int error = 0;
    const ssize_t got = ::read(exec_status, &error, sizeof error);
    if (got < 0 && errno == EINTR) continue;
    return got == sizeof error ? error : 0;
  }
}

// Why exec() said "No such file or directory" for a file that exists: its "#!" line names an
// interpreter that is not there. Empty when that is not the case.
std::string missing_interpreter(const std::string& path) {
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return {};
  char head[256] = {};
  const ssize_t got = ::read(fd.get(), head, sizeof head - 1);
  if (got < 2 || head[0] != '#' || head[1] != '!') return {};
  std::string line(head + 2, static_cast<std::size_t>(got) - 2);
  line = line.substr(0, line.find('\n'));
  const auto start = line.find_first_not_of(" \t");
  if (start == std::string::npos) return "its #! line names no interpreter";
  const std::string interpreter = line.substr(start, line.find_first_of(" \t\r", start) - start);
  return "its #! line names the interpreter '" + interpreter + "', " +
         (::access(interpreter.c_str(), F_OK) == 0 ? "which cannot be executed"
                                                   : "which does not exist");
}

}  // namespace

std::string resolve_program(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    if (const int error = executable_error(program))
      cannot_execute(program, error, error == ENOENT ? 127 : 126);
    return program;
  }
  const char* path = std::getenv("PATH");
  const std::string search = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  int first_error = ENOENT;
  std::size_t start = 0;
  for (;;) {
    const std::size_t colon = std::min(search.find(':', start), search.size());
    const std::string directory = search.substr(start, colon - start);
    const std::string candidate = (directory.empty() ? "." : directory) + "/" + program;
    const int error = executable_error(candidate);
    if (error == 0) return candidate;
    // As a shell does: a file that exists but cannot be executed is reported over "not found".
    if (error != ENOENT && error != ENOTDIR && first_error == ENOENT) first_error = error;
    if (colon == search.size()) break;
    start = colon + 1;
  }
  cannot_execute(program, first_error, first_error == ENOENT ? 127 : 126);
}

SpawnedRank spawn(const SpawnRequest& request) {
  UniqueFd null_input(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!null_input) detail::throw_system_error(errno, "open(/dev/null)");
  Pipe out = make_pipe();
  Pipe err = make_pipe();
  Pipe exec_status = make_pipe();
  const auto argv = c_strings(request.arguments);
  const auto envp = c_strings(request.environment);
  const pid_t launcher = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) detail::throw_system_error(errno, "fork()");
  if (pid == 0)
    become_rank(request, launcher, null_input.get(), out.writer.get(), err.writer.get(),
                exec_status.writer.get(), argv.data(), envp.data());

  // Also from this side, so that the group exists before anyone signals it.
  ::setpgid(pid, pid);
  exec_status.writer.reset();
  out.writer.reset();
  err.writer.reset();
  SpawnedRank spawned{pid, std::move(out.reader), std::move(err.reader)};
  if (const int error = wait_for_exec(exec_status.reader.get())) {
    ::kill(-pid, SIGKILL);
    if (error == ENOENT || error == EACCES || error == ENOEXEC) {
      if (const std::string why = missing_interpreter(request.path); !why.empty())
        throw LaunchError("cannot execute '" + request.arguments.front() + "': " + why, 126);
    }
    cannot_execute(request.arguments.front(), error, 126);
  }
  for (const int fd : {spawned.stdout_reader.get(), spawned.stderr_reader.get()})
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return spawned;
}

}  // namespace iris::run
