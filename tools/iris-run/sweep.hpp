// Making sure that no process of a job outlives it: the sweep of leftovers, and the watchdog
// that does the same when iris-run itself is killed.
#pragma once

#include <sys/types.h>

#include <string>

#include "detail/socket.hpp"

namespace iris::run {

/// Kills with SIGKILL every process (that this user may signal) whose environment holds the
/// entry `marker` ("IRIS_BOOTSTRAP=unix:@iris-run-..." names one job), and, with
/// `own_children`, every child of this process, except `spared`; repeats until a pass finds
/// none (the children of a killed process become ours, since iris-run is a subreaper). Returns
/// how many it killed. Reads /proc; never throws.
int sweep(const std::string& marker, bool own_children, pid_t spared) noexcept;

/// A child process that outlives iris-run by a moment: iris-run tells it every rank's process
/// group; if iris-run dies without release() (SIGKILL, a crash), the watchdog kills those groups
/// and sweep()s the job's marker, then exits. It ignores SIGINT, SIGTERM and SIGHUP (it ends
/// when iris-run does) and holds no descriptor of the job. Must be started while the launcher
/// has a single thread.
class Watchdog {
 public:
  explicit Watchdog(const std::string& marker);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  pid_t pid() const noexcept { return pid_; }
  /// Adds a rank's process group to those killed if iris-run dies.
  void guard(pid_t group) noexcept;
  /// iris-run ends normally: the watchdog exits without killing anything. The caller reaps it.
  void release() noexcept;

 private:
  detail::UniqueFd writer_;
  pid_t pid_ = -1;
};

}  // namespace iris::run
