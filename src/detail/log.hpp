// Logging for the runtime and tools: one line per message on stderr, filtered by IRIS_LOG_LEVEL.
#pragma once

#include <sstream>
#include <string>

namespace iris::detail {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3, kTrace = 4 };

/// The level read from IRIS_LOG_LEVEL once (warn when unset); an unknown name is reported once
/// and treated as warn, since logging must not be the thing that fails.
LogLevel log_level();
bool log_enabled(LogLevel level);
/// Writes "iris <level> [rank R]: message" as one write(2), so that lines of ranks that share a
/// terminal do not interleave mid-line. The rank comes from IRIS_RANK, RANK (torchrun),
/// OMPI_COMM_WORLD_RANK or PMI_RANK, the first that is set.
void log_line(LogLevel level, const std::string& message);

template <class... Args>
void log(LogLevel level, const Args&... args) {
  if (!log_enabled(level)) return;
  std::ostringstream text;
  (text << ... << args);
  log_line(level, text.str());
}

}  // namespace iris::detail
