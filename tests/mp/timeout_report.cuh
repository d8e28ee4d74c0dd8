// Shared by the multi-rank tests of bounded waits and of debug checks: one rank runs a kernel
// that must time out (its host must throw iris::Error(kDeviceTimeout) with the report) or whose
// debug check must fire (iris::Error of another code, with the check's report).
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

/// The rank's Context with IRIS_DEBUG_CHECKS on (waits bounded as by default); never destroyed
/// (see above).
inline iris::Context& debug_check_context() {
  static iris::Context* ctx = [] {
    iris::ContextOptions options;
    options.heap_size = std::size_t{64} << 20;
    options.debug_checks = true;
    return new iris::Context(iris::Context::from_env(options));
  }();
  return *ctx;
}

/// Calls `launch` (which starts the kernel that must trap) and returns the message of the
/// iris::Error the host then gets: of code kDeviceTimeout when `timeout`, of another code else.
/// A missing error (`missing` says what did not happen) or one of the wrong code fails the test.
template <class Launch>
std::string trap_message(iris::Context& ctx, Launch&& launch, bool timeout, const char* missing) {
  launch();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  try {
    cudaDeviceSynchronize();
    ctx.check_device_errors();
    ADD_FAILURE() << missing;
  } catch (const iris::Error& error) {
    if (timeout)
      EXPECT_EQ(error.code(), iris::Errc::kDeviceTimeout);
    else
      EXPECT_NE(error.code(), iris::Errc::kDeviceTimeout);
    return error.message();
  }
  return "";
}

/// The report of a kernel that must time out (see trap_message).
template <class Launch>
std::string timeout_message(iris::Context& ctx, Launch&& launch) {
  return trap_message(ctx, launch, true, "the wait did not time out");
}

/// The report of a kernel whose debug check must fire (see trap_message).
template <class Launch>
std::string debug_check_message(iris::Context& ctx, Launch&& launch) {
  return trap_message(ctx, launch, false, "the check did not fire");
}

}  // namespace iris_test
