// Relaying a rank's output line by line, each line behind "[rank R] ".
#pragma once

#include <string>
#include <string_view>

#include "detail/socket.hpp"

namespace iris::run {

/// Writes "iris-run: <message>" to stderr. Never throws: when stderr cannot be written the
/// message is dropped (and, the first time, said on stdout if that still works).
void say(std::string_view message) noexcept;

/// Reads one of a rank's pipes and writes every line it carries to `destination` behind
/// `prefix`, one write per line, so that lines of different ranks never mix. A line longer than
/// 64 KiB is written as several lines of 64 KiB. When the destination cannot be written (closed
/// reader, full disk, I/O error) the relay keeps reading and drops the output; the failure is
/// said once on the other stream (not for a closed reader, which is how `| head` ends).
class LineRelay {
 public:
  LineRelay(detail::UniqueFd source, int destination, std::string prefix);

  /// The pipe to poll(), or -1 once it reached end-of-file.
  int fd() const noexcept { return source_.get(); }
  bool open() const noexcept { return source_.valid(); }

  /// Relays what the pipe holds now; at end-of-file, flushes a last line that has no newline
  /// and closes the pipe.
  void relay_available();
  /// Flushes a partial line and closes the pipe (for a pipe that a stray process keeps open).
  void close();

 private:
  void emit(std::string_view line);

  detail::UniqueFd source_;
  int destination_;
  std::string prefix_;
  std::string partial_;  // bytes after the last newline
};

}  // namespace iris::run
