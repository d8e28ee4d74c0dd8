// Shared by the missing-rank tests: rank 0 alone makes a collective call that the other ranks
// never join, and the report its kernel leaves is returned (the host throws it as
// iris::Error(kDeviceTimeout)). Only rank 0 calls: a trap under MPS ends the other ranks' CUDA
// contexts too, so one rank traps; the others return an empty string.
#pragma once

#include <string>

#include "iris/ccl.hpp"
#include "mp/timeout_report.cuh"

namespace ccl_test {

/// `call(comm, buf)` on rank 0 only; `buf` holds 4096 floats on the heap.
template <class Call>
std::string lone_call_report(Call&& call) {
  iris::Context& ctx = iris_test::timeout_context();
  // Never destroyed: its collective teardown needs a working device (see timeout_report.cuh).
  auto* comm = new iris::ccl::Communicator(ctx);
  auto* buf = static_cast<float*>(ctx.allocate_bytes(4096 * sizeof(float)));
  ctx.barrier();
  if (ctx.rank() != 0) return "";
  return iris_test::timeout_message(ctx, [&] { call(*comm, buf); });
}

}  // namespace ccl_test
