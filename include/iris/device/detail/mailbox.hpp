// Where a kernel leaves the report of a failed bounded wait or debug check before it traps, and
// how the host turns it into a message. Not public.
//
// The host Context allocates one ErrorMailbox per rank in pinned, mapped host memory and zeroes it
// (zero = empty). The first device thread to fail claims it with a compare-and-swap, fills it in,
// marks it complete, and traps; the host reads it after the failed synchronization, when the
// device can no longer write. Plain C++ so that host-only translation units can include it; the
// host's formatting of a report lives in src/ (src/detail/mailbox_format.hpp), so kernels do not
// compile it.
#pragma once

#include <cstdint>

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
  kBadMember,      ///< debug check: `target_rank` is not a member index of the team (`expected`
                   ///< members; `observed` = start << 32 | stride), or the team leaves the world
  kNotInTeam,      ///< a barrier object used by a rank outside its team (`expected` = team size,
                   ///< `observed` = start << 32 | stride)
  kBadChannel,     ///< a barrier object's channel `observed` is not below its `expected` channels
  kArgumentMismatch,   ///< debug check: a collective's argument (named in `operation`) is
                       ///< `expected` here but `observed` on rank `target_rank`
  kArriveTwice,        ///< debug check: a second arrive on barrier channel `channel` before the
                       ///< wait for the arrival at epoch `observed` (`expected`: epoch completed)
  kStaleToken,         ///< debug check: a wait on channel `channel` for epoch `observed`, not the
                       ///< channel's latest arrival `expected`
  kTooManyWarpGroups,  ///< an iris::warps<`expected`> group `observed` past the eighth synced;
                       ///< `bytes` = blockDim as x << 40 | y << 20 | z
  kBadAlgorithm,       ///< a device collective was asked for iris::ccl::Algorithm value
                       ///< `observed`, which it does not implement
  kMessageTooLarge,    ///< a receive of `expected` bytes from rank `target_rank`, which sends
                       ///< `observed`
  kBadStep,            ///< a tile collective's Round step `observed`, not below the `expected`
                       ///< steps a kernel's epoch has
  kBadCount,           ///< a count or offset (named in `operation`) of rank `target_rank`'s
                       ///< table is `observed` (signed), below 0
};

/// What a wait that timed out was waiting for, so that the report can name who did not come.
enum class Awaited : std::uint32_t {
  kFlag = 0,     ///< a flag to meet a condition (wait_until)
  kRank,         ///< a barrier: rank `awaited_rank` to arrive at epoch `expected`
  kGridBlocks,   ///< a grid barrier's block 0: the grid's other blocks (`expected` of them)
  kGridRelease,  ///< a grid barrier's other blocks: block 0 to release them
  kChannelRank,  ///< a barrier object: rank `awaited_rank` to arrive at epoch `expected` on
                 ///< channel `channel`
  kPacket,       ///< a packet of round `expected` from rank `awaited_rank` (the slot holds round
                 ///< `observed`'s); a collective's names its team
};

/// How `expected` and `observed` are to be read.
enum class ValueKind : std::uint32_t { kUnsigned = 0, kSigned = 1 };

}  // namespace iris::device::detail

namespace iris::device {

/// Declared in iris/device/context.hpp; its layout is internal.
struct ErrorMailbox {
  detail::MailboxState state;
  detail::ErrorKind kind;
  char operation[32];        ///< NUL-terminated name of the device function that failed
  std::int32_t rank;         ///< the rank that failed
  std::int32_t target_rank;  ///< the rank whose memory the operation addressed
  std::int32_t world_size;
  cmp comparison;  ///< wait condition (timeouts)
  detail::ValueKind value_kind;
  detail::Awaited awaited;    ///< what a timed-out wait waited for
  std::int32_t awaited_rank;  ///< the rank a barrier waited for (Awaited::kRank, kChannelRank)
  std::int32_t channel;       ///< the barrier channel (Awaited::kChannelRank, kArriveTwice,
                              ///< kStaleToken)
  std::int32_t team_start;    ///< the team (Awaited::kChannelRank, a collective's kPacket; size 0:
  std::int32_t team_size;     ///< not given)
  std::int32_t team_stride;
  std::int64_t heap_offset;  ///< byte offset of the address from the start of its heap
  std::uint64_t bytes;       ///< bytes the operation addressed (debug checks)
  std::uint64_t heap_size;   ///< bytes per rank's heap (debug checks)
  std::uint64_t expected;    ///< the value waited for (timeouts), the limit (kTooMany*), or the
                             ///< destination tile as rows << 32 | cols (kShapeMismatch)
  std::uint64_t observed;    ///< the last value seen (timeouts), the count asked for, or the
                             ///< source tile
  std::uint64_t elapsed_ns;  ///< how long the wait ran
  std::uint32_t block[3];    ///< blockIdx of the reporting thread
  std::uint32_t thread[3];   ///< threadIdx of the reporting thread
};

}  // namespace iris::device
