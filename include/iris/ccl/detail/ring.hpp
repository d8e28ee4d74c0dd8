// The ring algorithms, shared by the host collectives (src/ccl) and the tile collectives
// (iris/ccl/device.hpp). Not public.
//
// In a ring every member talks to its two neighbours only: it reads from its left neighbour
// (team index - 1) and is read by its right neighbour (index + 1). Block c of a member works
// with block c of its neighbours. Between the steps a block tells its right neighbour that
// what it will read is ready (ring_data) and, for the reduce_scatter's staging, its left
// neighbour that it has finished reading (ring_room): signals of one writer and one reader
// (sync.hpp), not barriers. Their values are ring_value(epoch, item): the call's epoch in the
// high bits and the item within the call in the low kRingItemBits, so they only grow, across
// calls and within one, and need no reset (graph-safe). The caller brackets a ring with the
// team exchanges of every collective: the entry (every member's inputs are ready) and the
// exit (every neighbour has finished reading this rank's buffers), which also keep two calls'
// items apart.
#pragma once

#include <cstdint>
#include <cstring>

#include "iris/ccl/detail/args.hpp"
#include "iris/ccl/detail/reduce.hpp"
#include "iris/ccl/detail/sync.hpp"
#include "iris/device/detail/wait.hpp"
#include "iris/device/rma.hpp"

namespace iris::ccl::detail {

IRIS_HOST_DEVICE IRIS_FORCEINLINE constexpr std::uint64_t ring_value(std::uint64_t epoch,
                                                                     std::uint64_t item) {
  return (epoch << kRingItemBits) + item + 1;
}

/// A member's place in the ring: its team index, the team's size and its neighbours' indices.
struct RingPlace {
  int me, members, left, right;
};
IRIS_DEVICE_FN IRIS_FORCEINLINE RingPlace ring_place(const device::Communicator& comm) {
  const int me = comm.index;
  const int members = comm.team.size;
  return {me, members, (me + members - 1) % members, (me + 1) % members};
}

/// Thread 0 of a block: waits (bounded; acquire at system scope) until this rank's ring signal
/// `slot` reaches `value`, which team member `from`'s block `channel` raises. A timeout
/// reports "<call> step <step>/<steps>" (1-based), the channel, the member's world rank and
/// the team, and traps.
IRIS_DEVICE_FN inline void ring_await(const device::Communicator& comm, const std::uint64_t* slot,
                                      std::uint64_t value, int from, int channel, const char* call,
                                      int step, int steps) {
  namespace dd = iris::device::detail;
  if (dd::ptx<cuda::memory_order_acquire, cuda::thread_scope_system>::load(slot) >= value) return;
  char name[32];
  int at = append(name, 0, call);
  at = append(name, at, " step ");
  at = append_number(name, at, static_cast<unsigned>(step));
  at = append(name, at, "/");
  append_number(name, at, static_cast<unsigned>(steps));
  dd::wait_for<cuda::memory_order_acquire, cuda::thread_scope_system>(
      comm.ctx, name, slot, comm.ctx.rank(), cmp::ge, value,
      {.what = dd::Awaited::kChannelRank,
       .rank = comm.world_rank(from),
       .channel = channel,
       .team_start = comm.team.start,
       .team_size = comm.team.size,
       .team_stride = comm.team.stride});
}

/// The ring all_gather of one block's share of every part. Part k of the output starts at
/// dst + k * stride (elements); this member's part is src (in place: already at dst + index *
/// stride); the block moves `n` elements of each part from those starts. Step t (0 .. members -
/// 2) pulls part (index - t - 1) from the left neighbour, which holds it since its step t - 1
/// (step 0: the neighbour's own part, from its src or, in place, its dst); before step t > 0
/// the block waits for the left neighbour's block `channel` to announce its step t - 1 (item
/// first_item + t - 1), and after a step whose part the right neighbour reads next it announces
/// it (item first_item + t). Out of place, the own part is copied last. The caller makes the
/// entry and exit exchanges; items first_item .. first_item + members - 3 must be this
/// channel's in this call alone.
template <int InFlight, class T>
IRIS_DEVICE_FN void ring_all_gather(const device::Communicator& comm, int channel,
                                    std::uint64_t epoch, std::uint64_t first_item, T* dst,
                                    std::size_t stride, const T* src, std::size_t n,
                                    bool in_place) {
  const iris::block block;
  const auto& ctx = comm.ctx;
  const auto [me, members, left, right] = ring_place(comm);
  Control* c = control(comm);
  for (int t = 0; t + 1 < members; ++t) {
    if (t > 0) {
      if (block.thread_rank() == 0)
        ring_await(comm, &c->ring_data[channel][0], ring_value(epoch, first_item + t - 1), left,
                   channel, "ccl all_gather", t + 1, members - 1);
      block.sync();
    }
    const int part = ((me - t - 1) % members + members) % members;
    T* out = dst + static_cast<std::size_t>(part) * stride;
    const T* in = t == 0 && !in_place ? src : out;
    iris::device::get<InFlight>(block, ctx, out, in, n, comm.world_rank(left));
    if (t + 2 < members) {  // the right neighbour reads this part in its step t + 1
      block.sync();
      if (block.thread_rank() == 0)
        announce(comm, &c->ring_data[channel][0], ring_value(epoch, first_item + t),
                 comm.world_rank(right));
    }
  }
  if (!in_place)
    iris::device::get<InFlight>(block, ctx, dst + static_cast<std::size_t>(me) * stride, src, n,
                                ctx.rank());
}

/// Units of 16-byte input vectors one thread of the ring reduce_scatter keeps in flight: fewer
/// where one vector's accumulators take many registers (bytes widen to 64-bit integers).
template <class T>
inline constexpr int kRingUnits = sizeof(acc_t<T>) * (16 / sizeof(T)) > 32 ? 1 : 4;

/// One sub-chunk of one step of the ring reduce_scatter, `len` elements, by the whole block:
/// acc = (the left neighbour's partial sums `in_acc`, or at the first step its input `in_raw`)
/// op (this rank's input `own`); then the partial sums go to `out_acc` (this rank's staging)
/// or, at the last step, the finished result to `out`. `vectors`: every pointer and `len` allow
/// 16-byte accesses of T (the accumulators then do too).
template <class T, ReduceOp Op>
IRIS_DEVICE_FN void ring_reduce_chunk(acc_t<T>* out_acc, T* out, const acc_t<T>* in_acc,
                                      const T* in_raw, const T* own, std::size_t len, int members,
                                      bool vectors) {
  using A = acc_t<T>;
  constexpr std::size_t V = kVector<T>;
  constexpr int W = static_cast<int>(sizeof(A) * V / 16);  // 16-byte words of V accumulators
  constexpr int U = kRingUnits<T>;
  const bool first_step = in_acc == nullptr;
  const bool last_step = out_acc == nullptr;
  const std::size_t step = blockDim.x;
  std::size_t scalar_first = 0;
  if (vectors) {
    const std::size_t units = len / V;
    scalar_first = units * V;
    const auto* own_v = reinterpret_cast<const uint4*>(own);
    const auto* raw_v = reinterpret_cast<const uint4*>(in_raw);
    const auto* acc_in_v = reinterpret_cast<const uint4*>(in_acc);
    auto* acc_out_v = reinterpret_cast<uint4*>(out_acc);
    auto* out_v = reinterpret_cast<uint4*>(out);
#pragma unroll 1
    for (std::size_t u0 = threadIdx.x; u0 < units; u0 += U * step) {
      // Every load of the U units first, then the arithmetic.
      uint4 mine[U];
      uint4 theirs[U][W];
#pragma unroll
      for (int j = 0; j < U; ++j) {
        const std::size_t u = u0 + j * step;
        if (u >= units) break;
        mine[j] = own_v[u];
        if (first_step) {
          theirs[j][0] = raw_v[u];
        } else {
#pragma unroll
          for (int w = 0; w < W; ++w) theirs[j][w] = acc_in_v[u * W + w];
        }
      }
#pragma unroll
      for (int j = 0; j < U; ++j) {
        const std::size_t u = u0 + j * step;
        if (u >= units) break;
        A acc[V];
        if (first_step) {
          T e[V];
          memcpy(e, &theirs[j][0], 16);
#pragma unroll
          for (std::size_t x = 0; x < V; ++x) acc[x] = widen<T>(e[x]);
        } else {
          memcpy(acc, &theirs[j][0], sizeof(acc));
        }
        T m[V];
        memcpy(m, &mine[j], 16);
#pragma unroll
        for (std::size_t x = 0; x < V; ++x) acc[x] = combine(Op, acc[x], widen<T>(m[x]));
        if (last_step) {
          T r[V];
#pragma unroll
          for (std::size_t x = 0; x < V; ++x) r[x] = narrow<T>(finish(Op, acc[x], members));
          uint4 packed;
          memcpy(&packed, r, 16);
          out_v[u] = packed;
        } else {
          uint4 words[W];
          memcpy(words, acc, sizeof(acc));
#pragma unroll
          for (int w = 0; w < W; ++w) acc_out_v[u * W + w] = words[w];
        }
      }
    }
  }
  for (std::size_t x = scalar_first + threadIdx.x; x < len; x += step) {
    A acc = first_step ? widen<T>(in_raw[x]) : in_acc[x];
    acc = combine(Op, acc, widen<T>(own[x]));
    if (last_step) {
      out[x] = narrow<T>(finish(Op, acc, members));
    } else {
      out_acc[x] = acc;
    }
  }
}

/// The ring reduce_scatter of one block's share of every part (teams of 2 or more): dst[i] =
/// op over members of their src[index * count + first + i] for i < n, where this block takes
/// elements [first, first + n) of every part. Part j is reduced in ring order starting after j:
/// member j + 1's contribution first, then j + 2, ..., j - 1, and member j's last (indices mod
/// the team size), in the accumulator type, rounded once (see ring_reduce_scatter below the
/// loop). In step t (0 .. members - 2) a member handles part (index - 2 - t) mod members: it
/// takes the left neighbour's partial sums of that part (at step 0, the neighbour's input),
/// adds its own input, and stages the result for its right neighbour; at the last step the
/// part is its own and the result goes to dst.
///
/// The block's share is cut into sub-chunks of `slot` elements (one staging slot of
/// accumulators). Sub-chunks go through the steps kRingGroup at a time (all steps of a group,
/// then the next group), so that a block waits for the partial sums its neighbour finished
/// kRingGroup sub-chunks earlier, not the one it is finishing now, and several sub-chunks are in
/// flight around the ring. Staged items form a queue per (rank, channel): item k in slot
/// k % kRingSlots of `staging` (this block's kRingSlots slots on this rank; the right
/// neighbour reads them at the same offsets on this rank); a block writes item k once its
/// right neighbour has announced that it read item k - kRingSlots (ring_room), and the right
/// neighbour reads it once this block has announced it (ring_data). Items are read in the order
/// they are written (the same loops on every member), so the counts are the whole protocol.
/// Deadlock-free: every wait is for a neighbour's earlier round (kRingSlots = 2 kRingGroup).
/// In place (dst == src + index * count) is safe: the own part is read only by this rank, in
/// the step that writes it, element by element.
template <class T, ReduceOp Op>
IRIS_DEVICE_FN void ring_reduce_scatter(const device::Communicator& comm, int channel,
                                        std::uint64_t epoch, T* dst, const T* src,
                                        std::size_t count, std::size_t first, std::size_t n,
                                        acc_t<T>* staging, std::size_t slot) {
  using A = acc_t<T>;
  const iris::block block;
  const auto& ctx = comm.ctx;
  const auto [me, members, left, right] = ring_place(comm);
  const int steps = members - 1;
  Control* c = control(comm);
  const auto total = static_cast<std::size_t>(members) * count;
  const T* left_src = ctx.translate(src, comm.world_rank(left), total);
  const A* left_staging =
      ctx.translate(static_cast<const A*>(staging), comm.world_rank(left), kRingSlots * slot);
  const bool vectors = aligned16(src) && aligned16(dst) && count * sizeof(T) % 16 == 0 &&
                       first * sizeof(T) % 16 == 0 && slot * sizeof(T) % 16 == 0;
  const std::size_t chunks = (n + slot - 1) / slot;
  std::uint64_t made = 0;  // items this block has staged
  std::uint64_t used = 0;  // items of the left neighbour's that this block has read
  for (std::size_t g = 0; g < chunks; g += kRingGroup) {
    const std::size_t g_end = g + kRingGroup < chunks ? g + kRingGroup : chunks;
    for (int t = 0; t < steps; ++t) {
      const int part = (me + members - 2 - t) % members;
      const bool last = t + 1 == steps;
      for (std::size_t i = g; i < g_end; ++i) {
        const std::size_t at = first + i * slot;  // element within the part
        const std::size_t len = first + n - at < slot ? first + n - at : slot;
        // Block syncs only around a wait or an announcement (block-uniform): a team of two has
        // neither (one step, from the neighbour's input straight to dst), and then its
        // sub-chunks stream without draining the block's loads between them.
        const bool reads_staging = t > 0;
        const bool waits =
            reads_staging || (!last && made >= static_cast<std::uint64_t>(kRingSlots));
        if (waits) {
          if (block.thread_rank() == 0) {
            if (reads_staging)
              ring_await(comm, &c->ring_data[channel][0], ring_value(epoch, used), left, channel,
                         "ccl reduce_scatter", t + 1, steps);
            if (!last && made >= static_cast<std::uint64_t>(kRingSlots))
              ring_await(comm, &c->ring_room[channel][0], ring_value(epoch, made - kRingSlots),
                         right, channel, "ccl reduce_scatter", t + 1, steps);
          }
          block.sync();
        }
        const std::size_t offset = static_cast<std::size_t>(part) * count + at;
        ring_reduce_chunk<T, Op>(
            last ? nullptr : staging + (made % kRingSlots) * slot, last ? dst + at : nullptr,
            reads_staging ? left_staging + (used % kRingSlots) * slot : nullptr, left_src + offset,
            src + offset, len, members, vectors);
        if (reads_staging || !last) {
          block.sync();
          if (block.thread_rank() == 0) {
            if (reads_staging)
              announce(comm, &c->ring_room[channel][0], ring_value(epoch, used),
                       comm.world_rank(left));
            if (!last)
              announce(comm, &c->ring_data[channel][0], ring_value(epoch, made),
                       comm.world_rank(right));
          }
        }
        if (t > 0) ++used;
        if (!last) ++made;
      }
    }
  }
}

/// ring_reduce_scatter with the operator fixed at compile time (one branch per call).
template <class T>
IRIS_DEVICE_FN void ring_reduce_scatter(const device::Communicator& comm, int channel,
                                        std::uint64_t epoch, T* dst, const T* src,
                                        std::size_t count, std::size_t first, std::size_t n,
                                        ReduceOp op, acc_t<T>* staging, std::size_t slot) {
  switch (op) {
    case ReduceOp::kSum:
      return ring_reduce_scatter<T, ReduceOp::kSum>(comm, channel, epoch, dst, src, count, first, n,
                                                    staging, slot);
    case ReduceOp::kProd:
      return ring_reduce_scatter<T, ReduceOp::kProd>(comm, channel, epoch, dst, src, count, first,
                                                     n, staging, slot);
    case ReduceOp::kMin:
      return ring_reduce_scatter<T, ReduceOp::kMin>(comm, channel, epoch, dst, src, count, first, n,
                                                    staging, slot);
    case ReduceOp::kMax:
      return ring_reduce_scatter<T, ReduceOp::kMax>(comm, channel, epoch, dst, src, count, first, n,
                                                    staging, slot);
    case ReduceOp::kAvg:
      return ring_reduce_scatter<T, ReduceOp::kAvg>(comm, channel, epoch, dst, src, count, first, n,
                                                    staging, slot);
  }
}

}  // namespace iris::ccl::detail
