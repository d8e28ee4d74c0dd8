// iris-run: starts the ranks of an Iris job on this host. See `iris-run --help`.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "detail/socket.hpp"
#include "iris/host/error.hpp"
#include "job.hpp"
#include "options.hpp"
#include "spawn.hpp"

namespace {

constexpr int kUsageExitCode = 2;

int complain(const std::string& message, int exit_code) {
  const std::string line = "iris-run: " + message + "\n";
  (void)iris::detail::write_all(STDERR_FILENO, line.data(), line.size());
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  iris::run::Options options;
  try {
    options = iris::run::parse_options(argc, argv);
  } catch (const iris::run::UsageError& error) {
    return complain(std::string(error.what()) + " (see iris-run --help)", kUsageExitCode);
  }
  if (options.help) {
    const std::string_view text = iris::run::usage();
    return iris::detail::write_all(STDOUT_FILENO, text.data(), text.size()) ? 0 : 1;
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
