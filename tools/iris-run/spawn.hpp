// Starting one rank: fork, set the child up, exec.
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "detail/socket.hpp"

namespace iris::run {

/// The program cannot be started; exit_code() is what a shell would return (126 or 127).
class LaunchError : public std::runtime_error {
 public:
  LaunchError(const std::string& message, int exit_code)
      : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const noexcept { return exit_code_; }

 private:
  int exit_code_;
};

/// The path execve() needs for `program`: itself when it contains a '/', else the first
/// executable file of that name in PATH. Throws LaunchError ("cannot execute 'foo': No such
/// file or directory", 127) when there is none.
std::string resolve_program(const std::string& program);

/// Everything a child needs, prepared before fork() so that the child only makes
/// async-signal-safe calls (the launcher has a rendezvous thread).
struct SpawnRequest {
  std::string path;                      ///< from resolve_program
  std::vector<std::string> arguments;    ///< argv, argv[0] included
  std::vector<std::string> environment;  ///< "NAME=value" entries
  sigset_t signal_mask;                  ///< the mask the program starts with
  rlimit open_files_limit{};             ///< RLIMIT_NOFILE for the program (rlim_cur 0: keep)
};

struct SpawnedRank {
  pid_t pid = -1;
  detail::UniqueFd stdout_reader;
  detail::UniqueFd stderr_reader;
};

/// Starts the program in a new process group of its own (pgid = pid), with stdin from
/// /dev/null, stdout and stderr into pipes (returned, non-blocking), default signal
/// dispositions, and SIGKILL as its parent-death signal. Waits until the exec happened; throws
/// LaunchError (126) when it failed, saying so when the file's "#!" line names an interpreter
/// that does not exist (exec's "No such file or directory" for a file that is there).
SpawnedRank spawn(const SpawnRequest& request);

}  // namespace iris::run
