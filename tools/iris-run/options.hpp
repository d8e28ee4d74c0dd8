// iris-run's command line.
#pragma once

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace iris::run {

/// The most ranks iris-run starts (one host rarely has more than 8 GPUs, each shared by at most
/// a few dozen MPS clients; the launcher and its rendezvous poll every rank's descriptors).
inline constexpr int kMaxRanks = 4096;

struct Options {
  int ranks = 0;
  std::vector<int> gpus;  ///< --gpus: rank r gets IRIS_DEVICE=gpus[local rank % size]
  std::optional<std::chrono::nanoseconds> timeout;  ///< --timeout: stop the job after this long
  std::vector<std::string> command;                 ///< the program and its arguments
  bool help = false;
};

/// A command line iris-run cannot run; the message says what is wrong.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Parses argv (argv[0] included). Throws UsageError. With --help, the rest is not checked.
Options parse_options(int argc, const char* const* argv);

/// The --help text.
std::string_view usage();

}  // namespace iris::run
