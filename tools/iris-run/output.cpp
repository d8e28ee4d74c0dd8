#include "output.hpp"

#include <unistd.h>

#include <cerrno>

#include "iris/host/error.hpp"

namespace iris::run {
namespace {
// A "line" longer than this is cut, so that a rank writing without newlines cannot make the
// launcher buffer without bound.
constexpr std::size_t kMaxLine = 64 * 1024;
}  // namespace

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
  if (destination_gone_) return;
  std::string text;
  text.reserve(prefix_.size() + line.size() + 1);
  text.append(prefix_).append(line).push_back('\n');
  // A reader that went away (iris-run ... | head) only ends the relaying, not the job.
  destination_gone_ = !detail::write_all(destination_, text.data(), text.size());
}

}  // namespace iris::run
