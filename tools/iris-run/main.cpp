// iris-run: starts the ranks of an Iris job on this host. See `iris-run --help`.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "detail/socket.hpp"
#include "iris/host/error.hpp"
#include "job.hpp"
#include "options.hpp"
#include "output.hpp"
#include "spawn.hpp"

namespace {

constexpr int kUsageExitCode = 2;

int complain(const std::string& message, int exit_code) {
  iris::run::say(message);
  return exit_code;
}

// Descriptors 0, 1 and 2 stay what they are meant to be: one that was closed when iris-run
// started is opened on /dev/null, so that no socket or pipe of the launcher takes its number
// (and ranks' output or iris-run's messages never go into one). Returns which were closed.
unsigned reserve_standard_descriptors() {
  unsigned closed = 0;
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    const int opened = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (opened != fd && opened >= 0) ::close(opened);  // cannot happen: the lowest is free
    closed |= 1u << fd;
  }
  return closed;
}

}  // namespace

int main(int argc, char** argv) {
  const unsigned closed = reserve_standard_descriptors();
  if ((closed & 2u) != 0 && (closed & 4u) == 0)
    iris::run::say("stdout is closed; the ranks' standard output is dropped, the job runs on");
  iris::run::Options options;
  try {
    options = iris::run::parse_options(argc, argv);
  } catch (const iris::run::UsageError& error) {
    return complain(std::string(error.what()) + " (see iris-run --help)", kUsageExitCode);
  }
  if (options.help) {
    const std::string_view text = iris::run::usage();
    try {
      return iris::detail::write_all(STDOUT_FILENO, text.data(), text.size()) ? 0 : 1;
    } catch (const iris::Error& error) {
      return complain("cannot print the help: " + error.message(), 1);
    }
  }
  try {
    return iris::run::run_job(options);
  } catch (const iris::run::LaunchError& error) {
    return complain(error.what(), error.exit_code());
  } catch (const iris::Error& error) {
    return complain(error.message(), 1);
  } catch (const std::exception& error) {
    return complain(error.what(), 1);
  }
}
