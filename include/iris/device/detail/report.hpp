// Device side of error reporting: fill the rank's ErrorMailbox, then trap. Not public.
#pragma once

#include <cstdint>

#include "iris/device/cmp.hpp"
#include "iris/device/context.hpp"
#include "iris/device/detail/mailbox.hpp"
#include "iris/device/detail/ptx.hpp"

namespace iris::device::detail {

/// What went wrong, as the failing call knows it; report_and_trap adds who and where.
struct Failure {
  ErrorKind kind = ErrorKind::kNone;
  const char* operation = "";
  int target_rank = 0;
  std::int64_t heap_offset = 0;
  std::uint64_t bytes = 0;
  cmp comparison = cmp::eq;
  ValueKind value_kind = ValueKind::kUnsigned;
  std::uint64_t expected = 0;
  std::uint64_t observed = 0;
  std::uint64_t elapsed_ns = 0;
  Awaited awaited = Awaited::kFlag;
  int awaited_rank = -1;
  int channel = -1;
  int team_start = 0;  ///< the team, for Awaited::kChannelRank and kPacket (size 0: none)
  int team_size = 0;
  int team_stride = 0;
};

/// How long a thread that lost the race for the mailbox lets the winner finish its report before
/// trapping (a trap stops every thread of the kernel, the writer's too).
inline constexpr std::uint64_t kReportGraceNs = 100'000'000;

/// Leaves `failure` in ctx.mailbox() (the first report wins; later ones are dropped) and traps:
/// the kernel stops, the host's next synchronization fails, and the host turns the report into
/// an iris::Error. Kept out of line: it is the cold end of every check and wait.
[[noreturn]] __noinline__ IRIS_DEVICE_FN inline void report_and_trap(const Context& ctx,
                                                                     const Failure& failure) {
  if (ErrorMailbox* m = ctx.mailbox(); m != nullptr) {
    auto* state = reinterpret_cast<unsigned*>(&m->state);
    if (atomicCAS_system(state, unsigned(MailboxState::kEmpty), unsigned(MailboxState::kWriting)) ==
        unsigned(MailboxState::kEmpty)) {
      m->kind = failure.kind;
      std::size_t i = 0;
      for (; i + 1 < sizeof(m->operation) && failure.operation[i] != '\0'; ++i)
        m->operation[i] = failure.operation[i];
      m->operation[i] = '\0';
      m->rank = ctx.rank();
      m->target_rank = failure.target_rank;
      m->world_size = ctx.world_size();
      m->comparison = failure.comparison;
      m->value_kind = failure.value_kind;
      m->heap_offset = failure.heap_offset;
      m->bytes = failure.bytes;
      m->heap_size = ctx.heap_size();
      m->expected = failure.expected;
      m->observed = failure.observed;
      m->elapsed_ns = failure.elapsed_ns;
      m->awaited = failure.awaited;
      m->awaited_rank = failure.awaited_rank;
      m->channel = failure.channel;
      m->team_start = failure.team_start;
      m->team_size = failure.team_size;
      m->team_stride = failure.team_stride;
      m->block[0] = blockIdx.x;
      m->block[1] = blockIdx.y;
      m->block[2] = blockIdx.z;
      m->thread[0] = threadIdx.x;
      m->thread[1] = threadIdx.y;
      m->thread[2] = threadIdx.z;
      ptx<cuda::memory_order_release, cuda::thread_scope_system>::store(
          state, unsigned(MailboxState::kComplete));
      fence_sc_system();
    } else {
      const std::uint64_t start = global_timer_ns();
      while (ptx<cuda::memory_order_relaxed, cuda::thread_scope_system>::load(state) !=
                 unsigned(MailboxState::kComplete) &&
             global_timer_ns() - start < kReportGraceNs) {
      }
    }
  }
  __trap();
  __builtin_unreachable();
}

/// Signed offset of `ptr` from the start of this rank's heap (negative or past the heap when
/// `ptr` is not a heap pointer; reports show it either way).
IRIS_DEVICE_FN IRIS_FORCEINLINE std::int64_t local_heap_offset(const Context& ctx,
                                                               const void* ptr) {
  return static_cast<const std::byte*>(ptr) - ctx.heap_base();
}

}  // namespace iris::device::detail
