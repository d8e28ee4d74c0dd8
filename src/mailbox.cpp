// Formatting of device error reports for the host (declared in detail/mailbox_format.hpp).
#include "detail/mailbox_format.hpp"

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace iris::detail {

using device::ErrorMailbox;
using device::detail::Awaited;
using device::detail::ErrorKind;
using device::detail::MailboxState;
using device::detail::ValueKind;

namespace {
namespace mailbox_format {

std::string printf_string(const char* format, auto... args) {
  char buffer[160];
  std::snprintf(buffer, sizeof(buffer), format, args...);
  return buffer;
}

std::string value(const ErrorMailbox& m, std::uint64_t bits) {
  return m.value_kind == ValueKind::kSigned
             ? printf_string("%" PRId64, static_cast<std::int64_t>(bits))
             : printf_string("%" PRIu64, bits);
}

std::string duration(std::uint64_t ns) {
  if (ns >= 1'000'000'000) return printf_string("%.1f s", static_cast<double>(ns) / 1e9);
  if (ns >= 1'000'000) return printf_string("%.1f ms", static_cast<double>(ns) / 1e6);
  return printf_string("%" PRIu64 " ns", ns);
}

std::string index(const std::uint32_t (&xyz)[3]) {
  if (xyz[1] == 0 && xyz[2] == 0) return std::to_string(xyz[0]);
  return printf_string("(%u,%u,%u)", xyz[0], xyz[1], xyz[2]);
}

std::string offset(std::int64_t offset) {
  return offset < 0 ? printf_string("-0x%" PRIx64, static_cast<std::uint64_t>(-offset))
                    : printf_string("0x%" PRIx64, static_cast<std::uint64_t>(offset));
}

std::string shape(std::uint64_t rows_cols) {
  return std::to_string(rows_cols >> 32) + " x " + std::to_string(rows_cols & 0xffffffffu);
}

/// " {start S, size N, stride D}" for a barrier object's team; empty where the report has none.
std::string team_shape(const ErrorMailbox& m) {
  if (m.team_size <= 0) return "";
  return " {start " + std::to_string(m.team_start) + ", size " + std::to_string(m.team_size) +
         ", stride " + std::to_string(m.team_stride) + "}";
}

}  // namespace mailbox_format

/// A timed-out wait: what it waited for, for how long, and what it saw last.
std::string wait_report(const ErrorMailbox& m) {
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
    case Awaited::kChannelRank:
      return after + " on channel " + std::to_string(m.channel) + " waiting for rank " +
             std::to_string(m.awaited_rank) + " to arrive at epoch " + f::value(m, m.expected) +
             " (it has reached epoch " + f::value(m, m.observed) +
             "; does every member of the team" + f::team_shape(m) +
             " arrive on this channel as often?)";
    case Awaited::kPacket:
      return after + " waiting for rank " + std::to_string(m.awaited_rank) + "'s packet of round " +
             f::value(m, m.expected) + " (the slot holds round " + f::value(m, m.observed) +
             "'s; " +
             (m.team_size > 0
                  ? "does every member of the team" + f::team_shape(m) + " make this call?)"
                  : std::string("does that rank send this round?)"));
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

}  // namespace

/// The report as one line, e.g. "rank 1: wait_until(heap offset 0x100040 on rank 1, ge 5) timed
/// out after 2.0 s, observed 3 (block 0, thread 0)"; nothing when the mailbox is empty.
std::optional<std::string> mailbox_report(const ErrorMailbox& m) {
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
    case ErrorKind::kBadMember:
      return who + ": member " + std::to_string(m.target_rank) + " is not in the team of " +
             std::to_string(m.expected) + " members (start " + std::to_string(m.observed >> 32) +
             ", stride " + std::to_string(m.observed & 0xffffffffu) + ") in the world of " +
             std::to_string(m.world_size) + " ranks" + where;
    case ErrorKind::kNotInTeam:
      return who + ": rank " + std::to_string(m.rank) + " is not a member of the barrier's team (" +
             std::to_string(m.expected) + " members, start " + std::to_string(m.observed >> 32) +
             ", stride " + std::to_string(m.observed & 0xffffffffu) + ")" + where;
    case ErrorKind::kBadChannel:
      return who + ": channel " + std::to_string(m.observed) + " is not below the " +
             std::to_string(m.expected) + " channels the barrier object has" + where;
    case ErrorKind::kArgumentMismatch:
      return who + " differs across the team: " + std::to_string(m.expected) + " here, " +
             std::to_string(m.observed) + " on rank " + std::to_string(m.target_rank) +
             " (every member must make the same collective call: the same count, type, op, "
             "root and in-place-ness)" +
             where;
    case ErrorKind::kArriveTwice:
      return who + ": a second arrive on channel " + std::to_string(m.channel) +
             " before the wait for its arrival at epoch " + std::to_string(m.observed) +
             " (the channel completed epoch " + std::to_string(m.expected) +
             "; on one channel a group alternates arrive and wait)" + where;
    case ErrorKind::kStaleToken:
      return who + ": the token is for epoch " + std::to_string(m.observed) + " on channel " +
             std::to_string(m.channel) + ", but the channel's latest arrival is at epoch " +
             std::to_string(m.expected) + " (wait with the token of the last arrive)" + where;
    case ErrorKind::kTooManyWarpGroups: {
      const std::uint64_t x = m.bytes >> 40, y = m.bytes >> 20 & 0xfffff, z = m.bytes & 0xfffff;
      const std::uint64_t group_threads = 32 * m.expected;
      const std::uint64_t groups =
          group_threads == 0 ? 0 : (x * y * z + group_threads - 1) / group_threads;
      const std::string dim = y == 1 && z == 1 ? std::to_string(x)
                                               : "(" + std::to_string(x) + "," + std::to_string(y) +
                                                     "," + std::to_string(z) + ")";
      return who + ": iris::warps<" + std::to_string(m.expected) + "> group " +
             std::to_string(m.observed) + " has no named barrier to sync on (blockDim " + dim +
             " makes " + std::to_string(groups) +
             " groups; warps<N> has ids 8-15 for groups 0-7: give the others an iris::warp_span "
             "with an id of their own)" +
             where;
    }
    case ErrorKind::kBadAlgorithm:
      return who + ": iris::ccl::Algorithm " + std::to_string(m.observed) +
             " is not one that this device collective implements (iris/ccl/device.hpp lists "
             "each one's)" +
             where;
    case ErrorKind::kMessageTooLarge:
      return who + ": rank " + std::to_string(m.target_rank) + " sends " +
             std::to_string(m.observed) + " bytes, more than the " + std::to_string(m.expected) +
             " bytes the receive buffer holds (nothing was copied)" + where;
    case ErrorKind::kBadStep:
      return who + ": Round step " + std::to_string(m.observed) + " is not below the " +
             std::to_string(m.expected) +
             " steps of a kernel's epoch (a block's tile collectives in one kernel take steps 0, "
             "1, ...; a later step would meet the next call's exchanges)" +
             where;
    case ErrorKind::kBadCount:
      return who + " of rank " + std::to_string(m.target_rank) + " holds " +
             f::value(m, m.observed) + " (counts and offsets must be 0 or more)" + where;
    case ErrorKind::kNone:
      break;
  }
  return who + ": unknown device error kind " + std::to_string(static_cast<std::uint32_t>(m.kind)) +
         where;
}

/// True when the report is a bounded wait that timed out (as opposed to a misuse that a check
/// caught).
bool mailbox_is_timeout(const ErrorMailbox& m) {
  return m.state != MailboxState::kEmpty && m.kind == ErrorKind::kWaitTimeout;
}

}  // namespace iris::detail
