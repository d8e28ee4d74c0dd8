// The debug check that every rank makes the same symmetric allocations (IRIS_DEBUG_CHECKS=1).
//
// Symmetric offsets agree between ranks only while every rank makes the same allocate and free
// calls, with the same arguments, in the same order. A rank that does not corrupts its peers'
// data silently and far from the cause. With the check on, every collective allocate and free
// allgathers a small fixed-size record of the call (sequence number, operation, bytes,
// alignment, offset, outcome, call site) and every rank compares all records. Because the check
// runs on every call, the first divergence is always the current call, and the error names it
// and what each rank did, for example:
//
//   symmetric heap call #7 (allocations and frees, counted from 1) differs between ranks:
//   ranks 0, 2-3 allocate 4096 B with alignment 256 at main.cu:42; rank 1 allocate 8192 B with
//   alignment 256 at main.cu:57. Every rank must make the same symmetric allocations and ...
//
// Call sites are reported but not compared: ranks may reach the same allocation through
// different code.
//
// Every rank of the bootstrap must have the check on, or none: the check is one allgather per
// call, and a rank without it would pair its next collective with another rank's check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <source_location>

#include "detail/allocator.hpp"
#include "iris/host/bootstrap.hpp"

namespace iris::detail {

class AllocationCheck {
 public:
  /// Checks through `bootstrap`, which must outlive the check.
  explicit AllocationCheck(Bootstrap& bootstrap) : bootstrap_(bootstrap) {}

  /// Collective. Compares this rank's allocate(bytes, alignment), called at `where`, with every
  /// other rank's current call. `offset` is what allocate returned, or nothing when it threw on
  /// this rank (so that a rank whose call failed still takes part and nobody waits for it).
  /// Throws iris::Error(kMismatch) on every rank when any record differs.
  void verify_allocate(std::size_t bytes, std::size_t alignment, std::optional<std::size_t> offset,
                       std::source_location where);

  /// Collective. As verify_allocate, for free(offset) of an allocation of `bytes` bytes, or of
  /// an offset that is not a live allocation when `bytes` is nothing.
  void verify_free(std::size_t offset, std::optional<std::size_t> bytes,
                   std::source_location where);

  /// Number of calls checked so far; the next call is number calls_checked() + 1.
  std::uint64_t calls_checked() const noexcept { return calls_checked_; }

 private:
  Bootstrap& bootstrap_;
  std::uint64_t calls_checked_ = 0;
};

/// A collective allocation: allocator.allocate(bytes, alignment), verified by `check` when it is
/// not null. On a mismatch the allocation is undone, so the heap is as before the call; when
/// allocate itself fails on every rank alike, its error (out of memory, bad alignment) is
/// rethrown after the check.
std::size_t checked_allocate(HeapAllocator& allocator, AllocationCheck* check, std::size_t bytes,
                             std::size_t alignment, std::source_location where);

/// A collective free: verified by `check` when it is not null, before anything is freed, then
/// allocator.free(offset).
void checked_free(HeapAllocator& allocator, AllocationCheck* check, std::size_t offset,
                  std::source_location where);

}  // namespace iris::detail
