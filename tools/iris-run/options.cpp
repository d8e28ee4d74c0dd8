#include "options.hpp"

#include <charconv>

#include "iris/host/env.hpp"
#include "iris/host/error.hpp"

namespace iris::run {
namespace {

constexpr std::string_view kUsage =
    R"(usage: iris-run -n N [--gpus LIST] [--timeout SECONDS] [--] PROGRAM [ARGS...]

Starts N ranks of PROGRAM on this host, one process per rank, and serves their rendezvous.

  -n N               number of ranks to start (N >= 1)
  --gpus LIST        comma-separated CUDA device ordinals: a rank with local rank r gets
                     IRIS_DEVICE=LIST[r % length]; without it each rank uses device
                     (local rank % device count). CUDA_VISIBLE_DEVICES is left alone.
  --timeout SECONDS  stop the job when it runs longer than this (exit code 124)
  -h, --help         print this help

Every rank gets IRIS_BOOTSTRAP, IRIS_JOB_SECRET, IRIS_RANK, IRIS_WORLD_SIZE, IRIS_LOCAL_RANK and
IRIS_LOCAL_WORLD_SIZE. Its stdin is /dev/null; each line it writes to stdout or stderr is
printed to iris-run's stdout or stderr behind "[rank R] ".

When a rank exits with a non-zero code or is killed by a signal, iris-run sends the other
ranks SIGTERM, then SIGKILL 3 s later, and exits with that rank's code (128 + the signal's
number for a signal). SIGINT, SIGTERM and SIGHUP are passed on to every rank; a second one
kills them at once. Every rank runs in its own process group, and the whole group is killed
when its rank ends, so no process of the job outlives iris-run.

Exit codes: 0 when every rank exits 0; the failing rank's code; 124 on --timeout; 128 + N
after signal N; 126 or 127 when PROGRAM cannot be executed or found; 2 for bad usage.
)";

int parse_rank_count(std::string_view text) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    throw UsageError("-n expects a number of ranks, not '" + std::string(text) + "'");
  if (value < 1) throw UsageError("-n must be at least 1, not " + std::string(text));
  return value;
}

std::vector<int> parse_gpus(std::string_view text) {
  std::vector<int> gpus;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    int value = -1;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (ec != std::errc() || end != item.data() + item.size() || item.empty() || value < 0)
      throw UsageError("--gpus expects device ordinals such as 0,1,2,3, not '" + std::string(text) +
                       "'");
    gpus.push_back(value);
    if (comma == text.size()) return gpus;
    start = comma + 1;
  }
}

std::chrono::nanoseconds parse_timeout(std::string_view text) {
  std::chrono::nanoseconds timeout{};
  try {
    timeout = env::parse_seconds(text, "--timeout");
  } catch (const Error&) {
    throw UsageError("--timeout expects a number of seconds, not '" + std::string(text) + "'");
  }
  if (timeout <= std::chrono::nanoseconds::zero())
    throw UsageError("--timeout must be more than 0 seconds");
  return timeout;
}

// Walks argv, handing out options and their values.
class Arguments {
 public:
  Arguments(int argc, const char* const* argv) : argc_(argc), argv_(argv) {}
  bool done() const { return index_ >= argc_; }
  std::string_view peek() const { return argv_[index_]; }
  std::string_view next() { return argv_[index_++]; }
  // The value of `option`, given as "--option=value", "-nvalue" (`joined`) or as the next
  // argument.
  std::string_view value_of(std::string_view option, std::string_view joined) {
    if (!joined.empty()) return joined;
    if (done()) throw UsageError(std::string(option) + " needs a value");
    return next();
  }

 private:
  int argc_;
  const char* const* argv_;
  int index_ = 1;
};

// Splits "--name=value" into name and value; other arguments have no joined value.
std::pair<std::string_view, std::string_view> split_joined(std::string_view argument) {
  if (argument.starts_with("--")) {
    const auto equals = argument.find('=');
    if (equals != std::string_view::npos)
      return {argument.substr(0, equals), argument.substr(equals + 1)};
  } else if (argument.starts_with("-n") && argument.size() > 2) {
    return {"-n", argument.substr(2)};
  }
  return {argument, {}};
}

}  // namespace

Options parse_options(int argc, const char* const* argv) {
  Options options;
  Arguments arguments(argc, argv);
  while (!arguments.done()) {
    const std::string_view argument = arguments.peek();
    if (argument == "--") {
      arguments.next();
      break;
    }
    if (!argument.starts_with('-') || argument == "-") break;  // the program starts here
    arguments.next();
    const auto [name, joined] = split_joined(argument);
    if (name == "-h" || name == "--help") {
      options.help = true;
      return options;
    } else if (name == "-n") {
      options.ranks = parse_rank_count(arguments.value_of(name, joined));
    } else if (name == "--gpus") {
      options.gpus = parse_gpus(arguments.value_of(name, joined));
    } else if (name == "--timeout") {
      options.timeout = parse_timeout(arguments.value_of(name, joined));
    } else {
      throw UsageError("unknown option '" + std::string(argument) + "'");
    }
  }
  while (!arguments.done()) options.command.emplace_back(arguments.next());
  if (options.ranks == 0) throw UsageError("missing -n: how many ranks to start");
  if (options.command.empty()) throw UsageError("no program to run");
  return options;
}

std::string_view usage() {
  return kUsage;
}

}  // namespace iris::run
