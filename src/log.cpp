#include "detail/log.hpp"

#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>

#include "iris/host/env.hpp"

namespace iris::detail {
namespace {

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kError:
      return "error";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kTrace:
      return "trace";
  }
  return "?";
}

LogLevel read_level() {
  const auto value = env::get(env::kLogLevel);
  if (!value) return LogLevel::kWarn;
  std::string name;
  for (const char c : *value)
    name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (name == "warning") return LogLevel::kWarn;
  for (int i = 0; i <= static_cast<int>(LogLevel::kTrace); ++i) {
    if (name == level_name(static_cast<LogLevel>(i))) return static_cast<LogLevel>(i);
  }
  const std::string warning =
      std::string("iris warn: ") + env::kLogLevel + "='" + *value +
      "' is not one of error, warn, info, debug, trace (in any case); using warn\n";
  (void)!::write(STDERR_FILENO, warning.data(), warning.size());
  return LogLevel::kWarn;
}

}  // namespace

LogLevel log_level() {
  static const LogLevel level = read_level();
  return level;
}

bool log_enabled(LogLevel level) {
  return static_cast<int>(level) <= static_cast<int>(log_level());
}

void log_line(LogLevel level, const std::string& message) {
  std::string line = "iris ";
  line += level_name(level);
  // The rank as iris-run, torchrun, Open MPI or PMI names it.
  for (const char* name : {env::kRank, "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"}) {
    if (const auto rank = env::get(name)) {
      line += " [rank " + *rank + "]";
      break;
    }
  }
  line += ": ";
  line += message;
  line += '\n';
  (void)!::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace iris::detail
