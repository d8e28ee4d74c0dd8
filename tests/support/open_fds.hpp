// How many file descriptors this process has open: tests compare it before and after, to show
// that nothing leaks.
#pragma once

#include <cstddef>
#include <filesystem>

namespace iris::test {

inline std::size_t open_fd_count() {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
    ++count;
  return count;
}

}  // namespace iris::test
