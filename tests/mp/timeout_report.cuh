// Shared by the multi-rank tests of bounded waits: one rank runs a kernel that must time out, and
// its host must throw iris::Error(kDeviceTimeout) with the report.
//
// The trap that ends the kernel also ends the process's CUDA context (and, under MPS, those of the
// other ranks on the GPU), so only one rank traps, each such test is its own executable, and the
// Context is deliberately never destroyed (its collective teardown needs a working device).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "iris/iris.hpp"

namespace iris_test {

/// The rank's Context, with waits bounded at half a second; never destroyed (see above).
inline iris::Context& timeout_context() {
  static iris::Context* ctx = [] {
    iris::ContextOptions options;
    options.heap_size = std::size_t{64} << 20;
    options.wait_timeout = std::chrono::milliseconds(500);
    return new iris::Context(iris::Context::from_env(options));
  }();
  return *ctx;
}

/// Calls `launch` (which starts the kernel that must time out) and returns the message of the
/// iris::Error the host then gets; a missing or different error fails the test.
template <class Launch>
std::string timeout_message(iris::Context& ctx, Launch&& launch) {
  launch();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  try {
    cudaDeviceSynchronize();
    ctx.check_device_errors();
    ADD_FAILURE() << "the wait did not time out";
  } catch (const iris::Error& error) {
    EXPECT_EQ(error.code(), iris::Errc::kDeviceTimeout);
    return error.message();
  }
  return "";
}

}  // namespace iris_test
