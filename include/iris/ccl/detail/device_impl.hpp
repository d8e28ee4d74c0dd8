// Bodies behind iris/ccl/device.hpp. Not public.
#pragma once

#include <cstdint>

#include "iris/ccl/detail/partition.hpp"
#include "iris/ccl/detail/reduce.hpp"
#include "iris/ccl/detail/ring.hpp"
#include "iris/ccl/detail/sync.hpp"
#include "iris/ccl/device.hpp"
#include "iris/device/rma.hpp"

namespace iris::ccl::detail {

/// Members whose 16-byte vectors one thread keeps in flight while it reduces a team larger
/// than 8 (the general path, one vector at a time).
inline constexpr int kMembersInFlight = 8;

/// 16-byte loads one thread keeps in flight while it reduces a team of up to 8 (vectors times
/// members): 16, or 8 where one vector's accumulators take more than 32 registers (bytes, which
/// widen to 16 64-bit values), so that the kernel stays within the registers that let two
/// 256-thread blocks (or one 512-thread block) share a multiprocessor.
template <class T>
inline constexpr int kLoadsInFlight = sizeof(acc_t<T>) * kVector<T> > 64 ? 8 : 16;

/// One 16-byte vector's result: the team-order reduction of `v[0 .. members)` (members <=
/// Members), packed again. The operator is a template argument, so that the per-element work
/// is the arithmetic alone (no branch on the operator per element): the same operations in the
/// same order as the run-time form, so the same bits.
template <int Members, class T, ReduceOp Op>
IRIS_DEVICE_FN IRIS_FORCEINLINE uint4 reduce_vector(const uint4 (&v)[Members], int members) {
  constexpr std::size_t V = kVector<T>;
  acc_t<T> acc[V];
#pragma unroll
  for (int k = 0; k < Members; ++k) {
    if (k >= members) break;
    T e[V];
    memcpy(e, &v[k], 16);
#pragma unroll
    for (std::size_t x = 0; x < V; ++x)
      acc[x] = k == 0 ? widen<T>(e[x]) : combine(Op, acc[x], widen<T>(e[x]));
  }
  T out[V];
#pragma unroll
  for (std::size_t x = 0; x < V; ++x) out[x] = narrow<T>(finish(Op, acc[x], members));
  uint4 packed;
  memcpy(&packed, out, 16);
  return packed;
}

/// Where member k's elements of a reduction come from, by default: member k's `src` (the same
/// symmetric address on every member), read through translate.
template <class T>
struct TranslatedSource {
  const device::Communicator& comm;
  const T* src;
  std::size_t n;  ///< elements read from it (the range translate checks)
  IRIS_DEVICE_FN IRIS_FORCEINLINE const T* operator()(int k) const {
    return comm.ctx.translate(src, comm.world_rank(k), n);
  }
};

/// The vector part of reduce_span for teams of at most `Members`: each thread takes `Vectors`
/// vectors at once (i, i + blockDim, ...) and issues the loads of every member for all of them
/// before it reduces any, so that about Vectors * Members 16-byte loads are in flight per
/// thread. Each vector is then reduced in team order exactly as one at a time would be. Every
/// member's source and (when `to_all`) destination is found once, before the loop.
template <int Vectors, int Members, class T, ReduceOp Op, class Source>
IRIS_DEVICE_FN void reduce_vectors(const device::Communicator& comm, uint4* d, bool to_all,
                                   const Source& source, std::size_t vectors) {
  if (vectors == 0) return;  // (the range checks below would see an empty range)
  const int members = comm.team.size;
  const auto& ctx = comm.ctx;
  const uint4* from[Members];
  uint4* to[Members];
#pragma unroll
  for (int k = 0; k < Members; ++k) {
    from[k] = reinterpret_cast<const uint4*>(source(k < members ? k : 0));
    to[k] = to_all && k < members ? ctx.translate(d, comm.world_rank(k), vectors) : d;
  }
  const int writers = to_all ? members : 1;
  const std::size_t step = blockDim.x;
#pragma unroll 1
  for (std::size_t i = threadIdx.x; i < vectors; i += Vectors * step) {
    uint4 v[Vectors][Members];
#pragma unroll
    for (int u = 0; u < Vectors; ++u)
#pragma unroll
      for (int k = 0; k < Members; ++k)
        if (k < members && i + u * step < vectors) v[u][k] = from[k][i + u * step];
#pragma unroll
    for (int u = 0; u < Vectors; ++u) {
      const std::size_t at = i + u * step;
      if (at >= vectors) break;
      const uint4 packed = reduce_vector<Members, T, Op>(v[u], members);
#pragma unroll
      for (int k = 0; k < Members; ++k)
        if (k < writers) to[k][at] = packed;
    }
  }
}

/// reduce_vectors with the operator fixed at compile time (one branch per call, not per
/// element).
template <int Vectors, int Members, class T, class Source>
IRIS_DEVICE_FN void reduce_vectors_op(const device::Communicator& comm, uint4* d, bool to_all,
                                      const Source& source, std::size_t vectors, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return reduce_vectors<Vectors, Members, T, ReduceOp::kSum>(comm, d, to_all, source, vectors);
    case ReduceOp::kProd:
      return reduce_vectors<Vectors, Members, T, ReduceOp::kProd>(comm, d, to_all, source, vectors);
    case ReduceOp::kMin:
      return reduce_vectors<Vectors, Members, T, ReduceOp::kMin>(comm, d, to_all, source, vectors);
    case ReduceOp::kMax:
      return reduce_vectors<Vectors, Members, T, ReduceOp::kMax>(comm, d, to_all, source, vectors);
    case ReduceOp::kAvg:
      return reduce_vectors<Vectors, Members, T, ReduceOp::kAvg>(comm, d, to_all, source, vectors);
  }
}

/// The vector part for any team: one vector at a time, members in groups of kMembersInFlight.
template <class T, class Source>
IRIS_DEVICE_FN void reduce_vectors_any(const device::Communicator& comm, uint4* d, bool to_all,
                                       const Source& source, std::size_t vectors, ReduceOp op) {
  constexpr std::size_t V = kVector<T>;
  const int members = comm.team.size;
  const auto& ctx = comm.ctx;
  for (std::size_t i = threadIdx.x; i < vectors; i += blockDim.x) {
    acc_t<T> acc[V];
    for (int k0 = 0; k0 < members; k0 += kMembersInFlight) {
      uint4 v[kMembersInFlight];
#pragma unroll
      for (int j = 0; j < kMembersInFlight; ++j)
        if (k0 + j < members) v[j] = reinterpret_cast<const uint4*>(source(k0 + j))[i];
#pragma unroll
      for (int j = 0; j < kMembersInFlight; ++j) {
        if (k0 + j >= members) break;
        T e[V];
        memcpy(e, &v[j], 16);
#pragma unroll
        for (std::size_t x = 0; x < V; ++x)
          acc[x] = (k0 + j == 0) ? widen<T>(e[x]) : combine(op, acc[x], widen<T>(e[x]));
      }
    }
    T out[V];
#pragma unroll
    for (std::size_t x = 0; x < V; ++x) out[x] = narrow<T>(finish(op, acc[x], members));
    uint4 packed;
    memcpy(&packed, out, 16);
    if (to_all) {
      for (int k = 0; k < members; ++k) ctx.translate(d, comm.world_rank(k))[i] = packed;
    } else {
      d[i] = packed;
    }
  }
}

/// The block reduces `n` elements: dst[i] = op over members k (team order) of source(k)[i],
/// where source(k) is member k's `n` elements (any memory this rank can read; every member's at
/// the same address modulo 16, as translated symmetric addresses are); the result goes to this
/// rank's dst, or to every member's dst when `to_all`. Thread t takes elements (or 16-byte
/// vectors) t, t + blockDim, ...: the same thread reads and writes an element, which is what
/// makes the in-place forms safe. Teams of up to 8 keep kLoadsInFlight vector loads in flight
/// per thread (several vectors at once); every vector and element is reduced in team order
/// whatever the path, so the bits do not depend on it.
template <class T, class Source>
IRIS_DEVICE_FN void reduce_span(const device::Communicator& comm, T* dst, bool to_all,
                                const Source& source, std::size_t n, ReduceOp op) {
  const int members = comm.team.size;
  const auto& ctx = comm.ctx;
  std::size_t scalar_first = 0;
  if (aligned16(dst) && aligned16(source(comm.index))) {
    constexpr std::size_t V = kVector<T>;
    const std::size_t vectors = n / V;
    scalar_first = vectors * V;
    auto* d = reinterpret_cast<uint4*>(dst);
    constexpr int L = kLoadsInFlight<T>;
    if (members <= 2) {
      reduce_vectors_op<L / 2, 2, T>(comm, d, to_all, source, vectors, op);
    } else if (members <= 4) {
      reduce_vectors_op<L / 4, 4, T>(comm, d, to_all, source, vectors, op);
    } else if (members <= 8) {
      reduce_vectors_op<L / 8, 8, T>(comm, d, to_all, source, vectors, op);
    } else {
      reduce_vectors_any<T>(comm, d, to_all, source, vectors, op);
    }
  }
  for (std::size_t i = scalar_first + threadIdx.x; i < n; i += blockDim.x) {
    const T r = reduce_in_order<T>(op, members, [&](int k) { return source(k)[i]; });
    if (to_all) {
      for (int k = 0; k < members; ++k) ctx.translate(dst, comm.world_rank(k))[i] = r;
    } else {
      dst[i] = r;
    }
  }
}

/// reduce_span of member k's `src` (the same symmetric address on every member).
template <class T>
IRIS_DEVICE_FN void reduce_span(const device::Communicator& comm, T* dst, bool to_all, const T* src,
                                std::size_t n, ReduceOp op) {
  reduce_span(comm, dst, to_all, TranslatedSource<T>{comm, src, n}, n, op);
}

/// Elements of shard k when `count` elements are cut into `members` shards whose starts stay
/// 16-byte aligned (shard_elements): [first, last).
template <class T>
IRIS_HOST_DEVICE IRIS_FORCEINLINE void shard_of(std::size_t count, int members, int k,
                                                std::size_t& first, std::size_t& last) {
  const std::size_t per = shard_elements(count, members, sizeof(T));
  first = per * static_cast<std::size_t>(k);
  if (first > count) first = count;
  last = first + per > count ? count : first + per;
}

/// Reports that a tile collective was asked for an algorithm it does not have, and traps.
[[noreturn]] __noinline__ IRIS_DEVICE_FN inline void report_bad_algorithm(
    const device::Communicator& comm, const char* operation, Algorithm algorithm) {
  iris::device::detail::report_and_trap(comm.ctx,
                                        {.kind = iris::device::detail::ErrorKind::kBadAlgorithm,
                                         .operation = operation,
                                         .target_rank = comm.ctx.rank(),
                                         .observed = static_cast<std::uint64_t>(algorithm)});
}

/// The first exchange value of a tile collective's round (its exit is one more), after checking
/// that the round's step leaves it inside the kernel's epoch: a step of kStepsPerEpoch / 2 or more
/// would meet the next call's exchanges, so it is reported (naming `operation`) and traps.
IRIS_DEVICE_FN IRIS_FORCEINLINE std::uint64_t round_entry(const device::Communicator& comm,
                                                          device::Round round,
                                                          const char* operation) {
  constexpr unsigned kSteps = static_cast<unsigned>(kStepsPerEpoch / 2);
  if (round.step >= kSteps)
    iris::device::detail::report_and_trap(comm.ctx,
                                          {.kind = iris::device::detail::ErrorKind::kBadStep,
                                           .operation = operation,
                                           .target_rank = comm.ctx.rank(),
                                           .expected = kSteps,
                                           .observed = round.step});
  return exchange_value(round.epoch, 2 * round.step);
}

}  // namespace iris::ccl::detail

namespace iris::ccl::device {

IRIS_DEVICE_FN inline std::uint64_t begin(const Communicator& comm) {
  return detail::epoch_begin(&detail::control(comm)->team);
}

IRIS_DEVICE_FN inline void end(const Communicator& comm, std::uint64_t epoch) {
  detail::epoch_end(&detail::control(comm)->team, epoch);
}

IRIS_DEVICE_FN inline void sync(iris::block, const Communicator& comm, Round round) {
  detail::team_exchange(comm, round.channel, detail::round_entry(comm, round, "ccl sync"),
                        "ccl sync");
}

template <class T>
IRIS_DEVICE_FN void all_gather(iris::block group, const Communicator& comm, Round round, T* dst,
                               const T* src, std::size_t count, Algorithm algorithm) {
  if (algorithm != Algorithm::kPull && algorithm != Algorithm::kPush &&
      algorithm != Algorithm::kRing && algorithm != Algorithm::kAuto)
    detail::report_bad_algorithm(comm, "ccl all_gather: bad algorithm", algorithm);
  const std::uint64_t entry = detail::round_entry(comm, round, "ccl all_gather");
  detail::team_exchange(comm, round.channel, entry, "ccl all_gather (entry)");
  // In place (on every member), member k's part already sits at dst + k * count on member k.
  const bool in_place = src == dst + static_cast<std::size_t>(comm.index) * count;
  if (algorithm == Algorithm::kRing) {
    // Items round.step * kMaxRanks + t: the steps' own ranges of the channel's ring signals.
    detail::ring_all_gather<iris::device::kVectorsInFlight>(
        comm, round.channel, round.epoch, std::uint64_t{round.step} * detail::kMaxRanks, dst, count,
        src, count, in_place);
  } else {
    for (int k = 0; k < comm.team.size; ++k) {
      if (in_place && k == comm.index) continue;
      if (algorithm == Algorithm::kPush) {
        // my part into member k's output
        iris::device::put(group, comm.ctx, dst + static_cast<std::size_t>(comm.index) * count, src,
                          count, comm.world_rank(k));
      } else {
        // member k's part into my output
        T* out = dst + static_cast<std::size_t>(k) * count;
        iris::device::get(group, comm.ctx, out, in_place ? out : src, count, comm.world_rank(k));
      }
    }
  }
  detail::team_exchange(comm, round.channel, entry + 1, "ccl all_gather (exit)");
}

template <class T>
IRIS_DEVICE_FN void reduce_scatter(iris::block, const Communicator& comm, Round round, T* dst,
                                   const T* src, std::size_t count, ReduceOp op) {
  const std::uint64_t entry = detail::round_entry(comm, round, "ccl reduce_scatter");
  detail::team_exchange(comm, round.channel, entry, "ccl reduce_scatter (entry)");
  detail::reduce_span(comm, dst, false, src + static_cast<std::size_t>(comm.index) * count, count,
                      op);
  detail::team_exchange(comm, round.channel, entry + 1, "ccl reduce_scatter (exit)");
}

template <class T>
IRIS_DEVICE_FN void all_reduce(iris::block, const Communicator& comm, Round round, T* dst,
                               const T* src, std::size_t count, ReduceOp op, Algorithm algorithm) {
  if (algorithm != Algorithm::kTwoShot && algorithm != Algorithm::kOneShotPull &&
      algorithm != Algorithm::kAuto)
    detail::report_bad_algorithm(comm, "ccl all_reduce: bad algorithm", algorithm);
  const std::uint64_t entry = detail::round_entry(comm, round, "ccl all_reduce");
  detail::team_exchange(comm, round.channel, entry, "ccl all_reduce (entry)");
  if (algorithm == Algorithm::kOneShotPull) {
    detail::reduce_span(comm, dst, false, src, count, op);
  } else {
    std::size_t first, last;
    detail::shard_of<T>(count, comm.team.size, comm.index, first, last);
    detail::reduce_span(comm, dst + first, true, src + first, last - first, op);
  }
  detail::team_exchange(comm, round.channel, entry + 1, "ccl all_reduce (exit)");
}

}  // namespace iris::ccl::device
