// Where a kernel leaves the report of a failed bounded wait or debug check before it traps, and
// how the host turns it into a message. Not public.
//
// The host Context allocates one ErrorMailbox per rank in pinned, mapped host memory and zeroes it
// (zero = empty). The first device thread to fail claims it with a compare-and-swap, fills it in,
// marks it complete, and traps; the host reads it after the failed synchronization, when the
// device can no longer write. Plain C++ so that host-only translation units can include it.
#pragma once

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "iris/device/cmp.hpp"

namespace iris::device::detail {

enum class MailboxState : std::uint32_t {
  kEmpty = 0,     ///< nothing reported
  kWriting = 1,   ///< a thread claimed the mailbox and is filling it in
  kComplete = 2,  ///< the report is whole
};

enum class ErrorKind : std::uint32_t {
  kNone = 0,
  kWaitTimeout,    ///< a bounded wait ran past ctx.wait_timeout_ns()
  kBadRank,        ///< debug check: the target rank is not in [0, world_size)
  kOutsideHeap,    ///< debug check: the accessed bytes are not inside the symmetric heap
  kTooManyRanks,   ///< the world is larger than the device barrier has slots for
  kTooManyBlocks,  ///< a block-level barrier ran in a block past the barrier's channels
  kShapeMismatch,  ///< debug check: a 2-D copy's tiles differ in rows or cols
};

/// What a wait that timed out was waiting for, so that the report can name who did not come.
enum class Awaited : std::uint32_t {
  kFlag = 0,     ///< a flag to meet a condition (wait_until)
  kRank,         ///< a barrier: rank `awaited_rank` to arrive at epoch `expected`
  kGridBlocks,   ///< a grid barrier's block 0: the grid's other blocks (`expected` of them)
  kGridRelease,  ///< a grid barrier's other blocks: block 0 to release them
};

/// How `expected` and `observed` are to be read.
enum class ValueKind : std::uint32_t { kUnsigned = 0, kSigned = 1 };

struct ErrorMailbox {
  MailboxState state;
  ErrorKind kind;
  char operation[32];        ///< NUL-terminated name of the device function that failed
  std::int32_t rank;         ///< the rank that failed
  std::int32_t target_rank;  ///< the rank whose memory the operation addressed
  std::int32_t world_size;
  cmp comparison;  ///< wait condition (timeouts)
  ValueKind value_kind;
  Awaited awaited;            ///< what a timed-out wait waited for
  std::int32_t awaited_rank;  ///< the rank a barrier waited for (Awaited::kRank)
  std::int64_t heap_offset;   ///< byte offset of the address from the start of its heap
  std::uint64_t bytes;        ///< bytes the operation addressed (debug checks)
  std::uint64_t heap_size;    ///< bytes per rank's heap (debug checks)
  std::uint64_t expected;     ///< the value waited for (timeouts), the limit (kTooMany*), or the
                              ///< destination tile as rows << 32 | cols (kShapeMismatch)
  std::uint64_t observed;     ///< the last value seen (timeouts), the count asked for, or the
                              ///< source tile
  std::uint64_t elapsed_ns;   ///< how long the wait ran
  std::uint32_t block[3];     ///< blockIdx of the reporting thread
  std::uint32_t thread[3];    ///< threadIdx of the reporting thread
};

namespace mailbox_format {

inline std::string printf_string(const char* format, auto... args) {
  char buffer[160];
  std::snprintf(buffer, sizeof(buffer), format, args...);
  return buffer;
}

inline std::string value(const ErrorMailbox& m, std::uint64_t bits) {
  return m.value_kind == ValueKind::kSigned
             ? printf_string("%" PRId64, static_cast<std::int64_t>(bits))
             : printf_string("%" PRIu64, bits);
}

inline std::string duration(std::uint64_t ns) {
  if (ns >= 1'000'000'000) return printf_string("%.1f s", static_cast<double>(ns) / 1e9);
  if (ns >= 1'000'000) return printf_string("%.1f ms", static_cast<double>(ns) / 1e6);
  return printf_string("%" PRIu64 " ns", ns);
}

inline std::string index(const std::uint32_t (&xyz)[3]) {
  if (xyz[1] == 0 && xyz[2] == 0) return std::to_string(xyz[0]);
  return printf_string("(%u,%u,%u)", xyz[0], xyz[1], xyz[2]);
}

inline std::string offset(std::int64_t offset) {
  return offset < 0 ? printf_string("-0x%" PRIx64, static_cast<std::uint64_t>(-offset))
                    : printf_string("0x%" PRIx64, static_cast<std::uint64_t>(offset));
}

inline std::string shape(std::uint64_t rows_cols) {
  return std::to_string(rows_cols >> 32) + " x " + std::to_string(rows_cols & 0xffffffffu);
}

}  // namespace mailbox_format

/// A timed-out wait: what it waited for, for how long, and what it saw last.
inline std::string wait_report(const ErrorMailbox& m) {
  namespace f = mailbox_format;
  const std::string after = " timed out after " + f::duration(m.elapsed_ns);
  // A grid barrier holds every block of the grid until all have come: blocks that never became
  // resident (a grid larger than the GPU holds at once) never come.
  constexpr const char* kResidency =
      "; a grid barrier needs every block of the grid resident at once: launch at most "
      "cudaOccupancyMaxActiveBlocksPerMultiprocessor x SMs blocks";
  switch (m.awaited) {
    case Awaited::kRank:
      return after + " waiting for rank " + std::to_string(m.awaited_rank) +
             " to arrive at epoch " + f::value(m, m.expected) + " (it has reached epoch " +
             f::value(m, m.observed) + "; does every rank run this barrier as often?)";
    case Awaited::kGridBlocks:
      return after + " waiting for the grid's other " + f::value(m, m.expected) +
             " blocks, of which " + f::value(m, m.observed) + " arrived" + kResidency;
    case Awaited::kGridRelease:
      return after +
             " waiting for block 0 to release the grid (it waits for every other block, "
             "then for the other ranks)" +
             kResidency;
    case Awaited::kFlag:
      break;
  }
  return "(heap offset " + f::offset(m.heap_offset) + " on rank " + std::to_string(m.target_rank) +
         ", " + std::string(to_string(m.comparison)) + " " + f::value(m, m.expected) + ")" + after +
         ", observed " + f::value(m, m.observed);
}

/// The report as one line, e.g. "rank 1: wait_until(heap offset 0x100040 on rank 1, ge 5) timed
/// out after 2.0 s, observed 3 (block 0, thread 0)"; nothing when the mailbox is empty.
inline std::optional<std::string> mailbox_report(const ErrorMailbox& m) {
  namespace f = mailbox_format;
  if (m.state == MailboxState::kEmpty) return std::nullopt;
  if (m.state != MailboxState::kComplete)
    return std::string("a device thread began an error report but did not finish it");
  char operation[sizeof(m.operation) + 1] = {};
  for (std::size_t i = 0; i < sizeof(m.operation) && m.operation[i] != '\0'; ++i)
    operation[i] = m.operation[i];
  const std::string who = "rank " + std::to_string(m.rank) + ": " + operation;
  const std::string where = " (block " + f::index(m.block) + ", thread " + f::index(m.thread) + ")";
  switch (m.kind) {
    case ErrorKind::kWaitTimeout:
      return who + wait_report(m) + where;
    case ErrorKind::kBadRank:
      return who + ": rank " + std::to_string(m.target_rank) + " is not in the world of " +
             std::to_string(m.world_size) + " ranks" + where;
    case ErrorKind::kOutsideHeap:
      return who + ": " + std::to_string(m.bytes) + " bytes at heap offset " +
             f::offset(m.heap_offset) + " on rank " + std::to_string(m.target_rank) +
             " are not inside the heap of " + f::offset(static_cast<std::int64_t>(m.heap_size)) +
             " bytes (not a symmetric heap pointer?)" + where;
    case ErrorKind::kTooManyRanks:
      return who + ": the world has " + std::to_string(m.observed) + " ranks, more than the " +
             std::to_string(m.expected) + " it supports" + where;
    case ErrorKind::kTooManyBlocks:
      return who + ": block " + std::to_string(m.observed) + " is past the " +
             std::to_string(m.expected) + " blocks it supports" + where;
    case ErrorKind::kShapeMismatch:
      return who + ": the destination tile is " + f::shape(m.expected) + ", the source tile " +
             f::shape(m.observed) + where;
    case ErrorKind::kNone:
      break;
  }
  return who + ": unknown device error kind " + std::to_string(static_cast<std::uint32_t>(m.kind)) +
         where;
}

/// True when the report is a bounded wait that timed out (as opposed to a misuse that a check
/// caught).
inline bool mailbox_is_timeout(const ErrorMailbox& m) {
  return m.state != MailboxState::kEmpty && m.kind == ErrorKind::kWaitTimeout;
}

}  // namespace iris::device::detail
