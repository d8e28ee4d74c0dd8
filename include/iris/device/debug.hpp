// Debug checks of translated accesses.
//
// With debug checks on (IRIS_DEBUG_CHECKS=1, or ContextOptions::debug_checks, which become
// ctx.debug_checks()), every device API call that reaches another rank, and every
// ctx.translate(...) in device code, first checks that the target rank is in [0, world_size) (a
// member of the team, for the team forms) and that the bytes it touches lie inside the symmetric
// heap. A violation leaves a report in the rank's mailbox ("rank 0: put: 4096 bytes at heap
// offset 0x3fffff00 on rank 1 are not inside the heap of 0x40000000 bytes ...") and traps; the
// host's next synchronization throws it as an iris::Error. With checks off, a call costs one
// predicate.
#pragma once

#include <cstddef>

#include "iris/device/context.hpp"
#include "iris/device/detail/config.hpp"

namespace iris::device {

/// When ctx.debug_checks(): reports and traps unless 0 <= to < ctx.world_size() and the `bytes`
/// bytes at `ptr` (a pointer into this rank's heap) lie inside the heap. `operation` names the
/// caller in the report. ctx.translate calls it; code that computes peer addresses another way
/// can call it itself:
///   iris::device::check_access(ctx, "my_epilogue", tile_ptr, tile_bytes, peer);
IRIS_DEVICE_FN void check_access(const Context& ctx, const char* operation, const void* ptr,
                                 std::size_t bytes, int to);

}  // namespace iris::device

#include "iris/device/detail/debug_impl.hpp"
