// One test of this binary, run again in a fresh child process: how the tests of device reports
// work. A report ends with a trap, which ends the CUDA context of the process, and under MPS that
// of every process on the GPU; the MPS server then takes no new process until they have all
// exited. So the failing kernel runs in a child (told what to do by an environment variable),
// the parent never makes a CUDA context of its own, and a child that finds the MPS server still
// recovering from the previous one is started again.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

namespace iris_test {

/// Runs `environment '<this binary>' --gtest_filter=<filter>` (environment: "NAME=value") and
/// returns what it printed on stdout and stderr, starting it again (up to a minute) while the
/// MPS server is still recovering from a previous child's trap.
inline std::string run_child_test(const std::string& environment, const std::string& filter) {
  char self[4096] = {};
  if (readlink("/proc/self/exe", self, sizeof(self) - 1) <= 0) return "cannot find this binary";
  const std::string command = environment + " '" + self + "' --gtest_filter=" + filter + " 2>&1";
  std::string output;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  do {
    output.clear();
    FILE* child = popen(command.c_str(), "r");
    if (child == nullptr) return "popen failed";
    char buffer[512];
    while (std::fgets(buffer, sizeof(buffer), child) != nullptr) output += buffer;
    pclose(child);
    if (output.find("MPS server is not ready") == std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  } while (std::chrono::steady_clock::now() < deadline);
  return output;
}

}  // namespace iris_test
