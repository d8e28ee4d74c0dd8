#include "output.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "iris/host/error.hpp"

namespace iris::run {
namespace {
// A "line" longer than this is cut, so that a rank writing without newlines cannot make the
// launcher buffer without bound.
constexpr std::size_t kMaxLine = 64 * 1024;

// Whether iris-run's stdout (1) and stderr (2) can still be written. Once a write failed (a
// full disk, an I/O error, a reader that went away) nothing more is written there.
bool g_lost[3] = {false, false, false};

const char* stream_name(int fd) {
  return fd == STDOUT_FILENO ? "stdout" : "stderr";
}

// Writes all of `text` to `fd`; false (and the stream marked lost) when it cannot. Never throws.
bool write_or_lose(int fd, std::string_view text) {
  if (fd < 0 || fd > 2 || g_lost[fd]) return false;
  std::string why;
  try {
    if (detail::write_all(fd, text.data(), text.size())) return true;
    why = "the reader went away";
  } catch (const Error& error) {
    why = error.message();
  }
  g_lost[fd] = true;
  // A closed pipe (iris-run ... | head) is how output normally ends: no word about it. Any
  // other failure is said once, on the other stream, if that still works.
  if (why != "the reader went away") {
    const int other = fd == STDOUT_FILENO ? STDERR_FILENO : STDOUT_FILENO;
    const std::string notice = std::string("iris-run: cannot write to ") + stream_name(fd) + " (" +
                               why +
                               "); dropping the ranks' further output there, the job runs on\n";
    if (!g_lost[other]) {
      try {
        if (!detail::write_all(other, notice.data(), notice.size())) g_lost[other] = true;
      } catch (const Error&) {
        g_lost[other] = true;
      }
    }
  }
  return false;
}

}  // namespace

void say(std::string_view message) noexcept {
  try {
    std::string line = "iris-run: ";
    line.append(message).push_back('\n');
    (void)write_or_lose(STDERR_FILENO, line);
  } catch (...) {  // out of memory: nothing left to say it with
  }
}

LineRelay::LineRelay(detail::UniqueFd source, int destination, std::string prefix)
    : source_(std::move(source)), destination_(destination), prefix_(std::move(prefix)) {}

void LineRelay::relay_available() {
  char buffer[16 * 1024];
  for (;;) {
    const ssize_t got = ::read(source_.get(), buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (got <= 0) {  // end of file, or an error that ends the stream the same way
      close();
      return;
    }
    partial_.append(buffer, static_cast<std::size_t>(got));
    std::size_t start = 0;
    for (std::size_t newline; (newline = partial_.find('\n', start)) != std::string::npos;
         start = newline + 1)
      emit(std::string_view(partial_).substr(start, newline - start));
    partial_.erase(0, start);
    while (partial_.size() >= kMaxLine) {
      emit(std::string_view(partial_).substr(0, kMaxLine));
      partial_.erase(0, kMaxLine);
    }
  }
}

void LineRelay::close() {
  if (!partial_.empty()) emit(partial_);
  partial_.clear();
  source_.reset();
}

void LineRelay::emit(std::string_view line) {
  // The pipe is still read when the destination is lost, so that the rank never blocks on a
  // full pipe: the job runs on, its output is dropped.
  if (destination_ >= 0 && destination_ <= 2 && g_lost[destination_]) return;
  std::string text;
  text.reserve(prefix_.size() + line.size() + 1);
  text.append(prefix_).append(line).push_back('\n');
  (void)write_or_lose(destination_, text);
}

}  // namespace iris::run
