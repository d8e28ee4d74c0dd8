#include "options.hpp"

#include <charconv>

#include "iris/host/env.hpp"
#include "iris/host/error.hpp"

namespace iris::run {
namespace {

constexpr std::string_view kUsage =
    R"(usage: iris-run -n N [--gpus LIST] [--timeout SECONDS] [--] PROGRAM [ARGS...]

Starts N ranks of PROGRAM on this host, one process per rank, and serves their rendezvous.

  -n N               number of ranks to start, 1 to 4096. Before starting any, iris-run
                     checks that it may open 4 files per rank and start N processes
                     (ulimit -n, ulimit -u), and says which limit is too low.
  --gpus LIST        comma-separated CUDA device ordinals: a rank with local rank r gets
                     IRIS_DEVICE=LIST[r % length]; without it each rank uses device
                     (local rank % device count). CUDA_VISIBLE_DEVICES is left alone.
  --timeout SECONDS  stop the job when it runs longer than this (exit code 124); a decimal
                     number of seconds above 0 and at most 9.2e9
  -h, --help         print this help

Every rank gets IRIS_BOOTSTRAP, IRIS_JOB_SECRET, IRIS_RANK, IRIS_WORLD_SIZE, IRIS_LOCAL_RANK and
IRIS_LOCAL_WORLD_SIZE. Its stdin is /dev/null; each line it writes to stdout or stderr is
printed to iris-run's stdout or stderr behind "[rank R] ". A line longer than 64 KiB is
printed as several lines of 64 KiB, each behind the prefix. When iris-run's stdout or stderr
cannot be written (closed, a full disk), that output is dropped, iris-run says so once on
the other stream where it can, and the job runs on. A rank that exits (even with code 0)
before joining the rendezvous fails the others' rendezvous at once, naming it.

When a rank exits with a non-zero code or is killed by a signal, iris-run sends the other
ranks SIGTERM, then SIGKILL 3 s later, and exits with that rank's code (128 + the signal's
number for a signal). SIGINT, SIGTERM and SIGHUP are passed on to every rank; a second one
kills them at once.

No process of the job outlives it. Every rank runs in its own process group, killed with
SIGKILL when its rank ends. iris-run is a subreaper: a descendant that left its rank's group
(setsid, a double fork) becomes iris-run's child when its parent dies, and every such child,
and every process that still carries this job's IRIS_BOOTSTRAP in its environment, is killed
when the last rank ends. If iris-run itself is killed, even by SIGKILL, the kernel kills
every rank (its parent-death signal) and a watchdog process kills every rank's process group
and every process carrying the job's IRIS_BOOTSTRAP. Only a process that left its group and
cleared its environment can escape that.

Exit codes: 0 when every rank exits 0; the failing rank's code; 124 on --timeout; 128 + N
after signal N; 126 or 127 when PROGRAM cannot be executed or found; 2 for bad usage.
)";

int parse_rank_count(std::string_view text) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range)
    throw UsageError("-n " + std::string(text) +
                     " is more ranks than iris-run starts on one host (at most " +
                     std::to_string(kMaxRanks) + ")");
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    throw UsageError("-n expects a number of ranks, not '" + std::string(text) + "'");
  if (value < 1) throw UsageError("-n must be at least 1, not " + std::string(text));
  if (value > kMaxRanks)
    throw UsageError("-n " + std::string(text) +
                     " is more ranks than iris-run starts on one host (at most " +
                     std::to_string(kMaxRanks) + ")");
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
  } catch (const Error& error) {
    throw UsageError(error.message());
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
