// The debug check that every team member makes the same call (IRIS_DEBUG_CHECKS): at the start
// of each team collective's kernel, block 0 of member 0 sends a description of its call (three
// packets, flagged with the epoch, into every other member's Control::args[epoch % 2]); block 0
// of every other member waits for it (bounded) and compares it with its own. A member whose call
// differs reports which argument differs, its value and member 0's, and traps; the host throws
// the report as an iris::Error. Only the members that differ from member 0 trap.
//
// Why the slots can be reused: member 0 rewrites a parity two calls later, after it finished the
// call in between, which every team collective finishes only after every member started it,
// i.e. after every member finished (and checked) the call before. No host step, no reset:
// graph-safe. Not public.
#pragma once

#include <cstdint>

#include "iris/ccl/detail/sync.hpp"
#include "iris/device/detail/report.hpp"
#include "iris/device/packet.hpp"

namespace iris::ccl::detail {

/// What a call looks like to the check: the kernel (collective and algorithm, `code`), the count
/// (elements, or bytes of one part for the movement collectives), the rows of a part
/// (all_gather_2d, whose count is then the bytes of a row; 0 for the other calls), the element
/// type and operator (+1, 0 when the call has none), the root (team index, or 0) and whether it
/// is in place. `name` names the call in the report.
struct CallArgs {
  std::uint32_t code;
  std::uint64_t count;
  const char* count_name;  ///< "count", "bytes" or "row bytes"
  std::uint64_t rows;
  std::uint32_t type;
  std::uint32_t op;
  std::uint32_t root;
  bool in_place;
  const char* name;
};

IRIS_DEVICE_FN IRIS_FORCEINLINE std::uint64_t pack_args(const CallArgs& a) {
  return std::uint64_t{a.code & 0xffu} | std::uint64_t{a.type & 0xffu} << 8 |
         std::uint64_t{a.op & 0xffu} << 16 | std::uint64_t{a.root & 0xffffu} << 24 |
         std::uint64_t{a.in_place} << 40;
}

/// The flag of a call's packets: the epoch's low 32 bits, 1 where they are 0 (an empty slot is
/// all zeros, so flag 0 would match a slot never written).
IRIS_DEVICE_FN IRIS_FORCEINLINE std::uint32_t packet_flag(std::uint64_t epoch) {
  const auto low = static_cast<std::uint32_t>(epoch);
  return low != 0 ? low : 1u;
}

/// Appends `text` to `out` (at most 31 characters in all, the mailbox's operation field).
IRIS_DEVICE_FN IRIS_FORCEINLINE int append(char* out, int at, const char* text) {
  for (int i = 0; text[i] != '\0' && at < 31; ++i) out[at++] = text[i];
  out[at] = '\0';
  return at;
}

/// Appends the decimal digits of `v` (at most 31 characters in all, as append).
IRIS_DEVICE_FN IRIS_FORCEINLINE int append_number(char* out, int at, unsigned v) {
  char digits[12];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (n > 0 && at < 31) out[at++] = digits[--n];
  out[at] = '\0';
  return at;
}

[[noreturn]] __noinline__ IRIS_DEVICE_FN inline void report_mismatch(
    const device::Communicator& comm, const char* call, const char* argument, std::uint64_t mine,
    std::uint64_t theirs) {
  char operation[32];
  int at = append(operation, 0, call);
  at = append(operation, at, ": ");
  append(operation, at, argument);
  iris::device::detail::report_and_trap(comm.ctx,
                                        {.kind = iris::device::detail::ErrorKind::kArgumentMismatch,
                                         .operation = operation,
                                         .target_rank = comm.world_rank(0),
                                         .expected = mine,
                                         .observed = theirs});
}

/// Every thread of block 0 calls (others may too: they return at once), before the call's
/// first exchange, when the context has debug checks on. `wait_name` names the wait for member
/// 0 in a timeout report (the call's entry exchange, which it stands in front of).
IRIS_DEVICE_FN inline void check_args(const device::Communicator& comm, std::uint64_t epoch,
                                      const CallArgs& args, const char* wait_name) {
  if (!comm.ctx.debug_checks() || blockIdx.x != 0 || comm.team.size < 2) return;
  using iris::device::packet;
  Control* c = control(comm);
  auto* slots = reinterpret_cast<packet*>(&c->args[epoch & 1][0][0]);
  const std::uint32_t flag = packet_flag(epoch);
  const std::uint64_t word = pack_args(args);
  if (comm.index == 0) {
    for (int k = 1 + static_cast<int>(threadIdx.x); k < comm.team.size;
         k += static_cast<int>(blockDim.x)) {
      iris::device::packet_put(comm.ctx, slots + 0, args.count, flag, comm.world_rank(k));
      iris::device::packet_put(comm.ctx, slots + 1, word, flag, comm.world_rank(k));
      iris::device::packet_put(comm.ctx, slots + 2, args.rows, flag, comm.world_rank(k));
    }
    return;
  }
  if (threadIdx.x != 0) return;
  std::uint64_t theirs[3];
  for (int i = 0; i < 3; ++i) {
    const std::uint64_t start = iris::device::detail::global_timer_ns();
    while (!iris::device::packet_poll(slots + i, flag, theirs[i])) {
      const std::uint64_t elapsed = iris::device::detail::global_timer_ns() - start;
      const std::uint64_t timeout = comm.ctx.wait_timeout_ns();
      if (timeout != 0 && elapsed > timeout)
        iris::device::detail::report_and_trap(
            comm.ctx, {.kind = iris::device::detail::ErrorKind::kWaitTimeout,
                       .operation = wait_name,
                       .target_rank = comm.ctx.rank(),
                       .heap_offset = iris::device::detail::local_heap_offset(comm.ctx, slots + i),
                       .bytes = sizeof(packet),
                       .expected = flag,
                       .elapsed_ns = elapsed,
                       .awaited = iris::device::detail::Awaited::kRank,
                       .awaited_rank = comm.world_rank(0)});
    }
  }
  const std::uint64_t w = theirs[1];
  if ((w & 0xffu) != args.code)
    report_mismatch(comm, args.name, "call or algorithm", args.code, w & 0xffu);
  if (theirs[0] != args.count)
    report_mismatch(comm, args.name, args.count_name, args.count, theirs[0]);
  if (theirs[2] != args.rows) report_mismatch(comm, args.name, "rows", args.rows, theirs[2]);
  if ((w >> 8 & 0xffu) != (args.type & 0xffu))
    report_mismatch(comm, args.name, "type", args.type, w >> 8 & 0xffu);
  if ((w >> 16 & 0xffu) != (args.op & 0xffu))
    report_mismatch(comm, args.name, "op", args.op, w >> 16 & 0xffu);
  if ((w >> 24 & 0xffffu) != (args.root & 0xffffu))
    report_mismatch(comm, args.name, "root", args.root, w >> 24 & 0xffffu);
  if ((w >> 40 & 1u) != std::uint64_t{args.in_place})
    report_mismatch(comm, args.name, "in-place", args.in_place, w >> 40 & 1u);
}

}  // namespace iris::ccl::detail
