// One iris-run job: its ranks, their rendezvous, their output, and how it ends.
#pragma once

#include "options.hpp"

namespace iris::run {

/// Runs the job that `options` describes and returns iris-run's exit code. Writes iris-run's
/// own messages ("iris-run: rank 2 (pid 1234) exited with code 3; ...") to stderr. Throws
/// LaunchError when the program cannot be started and iris::Error when the launcher itself
/// fails (both after stopping any rank already started).
int run_job(const Options& options);

}  // namespace iris::run
