#include "sweep.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

#include "iris/host/error.hpp"

namespace iris::run {
namespace {

// The parent pid and state letter of `pid`, from /proc/<pid>/stat; false when it is gone.
bool read_stat(pid_t pid, pid_t& parent, char& state) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(file, text)) return false;
  const auto close = text.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos || close + 4 >= text.size()) return false;
  state = text[close + 2];
  parent = static_cast<pid_t>(std::atol(text.c_str() + close + 4));
  return true;
}

bool environment_holds(pid_t pid, const std::string& entry) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  if (!file) return false;
  const std::string environment((std::istreambuf_iterator<char>(file)),
                                std::istreambuf_iterator<char>());
  std::string wanted = entry;
  wanted.push_back('\0');
  if (environment.compare(0, wanted.size(), wanted) == 0) return true;
  return environment.find('\0' + wanted) != std::string::npos;
}

}  // namespace

int sweep(const std::string& marker, bool own_children, pid_t spared) noexcept {
  try {
    const pid_t self = ::getpid();
    int total = 0;
    for (int pass = 0; pass < 50; ++pass) {
      int killed = 0;
      DIR* proc = ::opendir("/proc");
      if (proc == nullptr) return total;
      while (const dirent* entry = ::readdir(proc)) {
        char* end = nullptr;
        const long number = std::strtol(entry->d_name, &end, 10);
        if (end == entry->d_name || *end != '\0') continue;
        const auto pid = static_cast<pid_t>(number);
        if (pid == self || pid == spared) continue;
        pid_t parent = 0;
        char state = 0;
        if (!read_stat(pid, parent, state) || state == 'Z' || state == 'X') continue;
        if ((own_children && parent == self) || environment_holds(pid, marker)) {
          if (::kill(pid, SIGKILL) == 0) ++killed;
        }
      }
      ::closedir(proc);
      total += killed;
      if (killed == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return total;
  } catch (...) {
    return 0;
  }
}

Watchdog::Watchdog(const std::string& marker) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) detail::throw_system_error(errno, "pipe2()");
  detail::UniqueFd reader(fds[0]);
  writer_.reset(fds[1]);
  pid_ = ::fork();
  if (pid_ < 0) detail::throw_system_error(errno, "fork()");
  if (pid_ > 0) return;

  // The watchdog. Its own process group keeps a terminal's Ctrl-C away from it; it holds no
  // descriptor but its pipe, so that it keeps no output of the job open.
  ::setpgid(0, 0);
  for (const int signal : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGTTOU, SIGTTIN})
    ::signal(signal, SIG_IGN);
  const int null = ::open("/dev/null", O_RDWR);
  for (int fd = 0; fd <= 2; ++fd) ::dup2(null, fd);
  const int keep = reader.get();
  const bool closed_below = keep <= 3 || ::close_range(3, static_cast<unsigned>(keep) - 1, 0) == 0;
  if (!closed_below || ::close_range(static_cast<unsigned>(keep) + 1, ~0u, 0) != 0) {
    // A kernel before 5.9 has no close_range: close what the launcher can have open.
    const long highest = ::sysconf(_SC_OPEN_MAX);
    for (int fd = 3; fd < (highest > 0 && highest < 65536 ? highest : 65536); ++fd)
      if (fd != keep) ::close(fd);
  }
  std::vector<pid_t> groups;
  bool released = false;
  for (;;) {
    std::int32_t value = 0;
    const ssize_t got = ::read(keep, &value, sizeof value);
    if (got < 0 && errno == EINTR) continue;
    if (got != sizeof value) break;  // end of file: iris-run is gone (or done)
    if (value == 0)
      released = true;
    else
      groups.push_back(static_cast<pid_t>(value));
  }
  if (!released) {
    for (const pid_t group : groups) ::kill(-group, SIGKILL);
    sweep(marker, false, 0);
  }
  ::_exit(0);
}

Watchdog::~Watchdog() {
  writer_.reset();  // without release(): the watchdog kills what it was told about
}

void Watchdog::guard(pid_t group) noexcept {
  const auto value = static_cast<std::int32_t>(group);
  if (writer_) (void)!::write(writer_.get(), &value, sizeof value);
}

void Watchdog::release() noexcept {
  const std::int32_t done = 0;
  if (writer_) (void)!::write(writer_.get(), &done, sizeof done);
  writer_.reset();
}

}  // namespace iris::run
