// Bodies behind iris/ccl/device.hpp. Not public.
#pragma once

#include <cstdint>

#include "iris/ccl/detail/reduce.hpp"
#include "iris/ccl/detail/sync.hpp"
#include "iris/ccl/device.hpp"
#include "iris/device/rma.hpp"

namespace iris::ccl::detail {

/// Members whose 16-byte vectors one thread keeps in flight while it reduces.
inline constexpr int kMembersInFlight = 8;

template <class T>
inline constexpr std::size_t kVector = 16 / sizeof(T);

IRIS_DEVICE_FN IRIS_FORCEINLINE bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

/// The block reduces `n` elements: dst[i] = op over members k (team order) of member k's src[i];
/// the result goes to this rank's dst, or to every member's dst when `to_all`. Thread t takes
/// elements (or 16-byte vectors) t, t + blockDim, ...: the same thread reads and writes an
/// element, which is what makes the in-place forms safe.
template <class T>
IRIS_DEVICE_FN void reduce_span(const device::Communicator& comm, T* dst, bool to_all, const T* src,
                                std::size_t n, ReduceOp op) {
  const int members = comm.team.size;
  const auto& ctx = comm.ctx;
  std::size_t scalar_first = 0;
  if (aligned16(dst) && aligned16(src)) {
    constexpr std::size_t V = kVector<T>;
    const std::size_t vectors = n / V;
    scalar_first = vectors * V;
    const auto* s = reinterpret_cast<const uint4*>(src);
    auto* d = reinterpret_cast<uint4*>(dst);
    for (std::size_t i = threadIdx.x; i < vectors; i += blockDim.x) {
      acc_t<T> acc[V];
      for (int k0 = 0; k0 < members; k0 += kMembersInFlight) {
        uint4 v[kMembersInFlight];
#pragma unroll
        for (int j = 0; j < kMembersInFlight; ++j)
          if (k0 + j < members) v[j] = ctx.translate(s, comm.world_rank(k0 + j))[i];
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
  for (std::size_t i = scalar_first + threadIdx.x; i < n; i += blockDim.x) {
    const T r = reduce_in_order<T>(
        op, members, [&](int k) { return ctx.translate(src, comm.world_rank(k))[i]; });
    if (to_all) {
      for (int k = 0; k < members; ++k) ctx.translate(dst, comm.world_rank(k))[i] = r;
    } else {
      dst[i] = r;
    }
  }
}

/// Elements of shard k when `count` elements are cut into `members` shards whose starts stay
/// 16-byte aligned: [first, last).
template <class T>
IRIS_HOST_DEVICE IRIS_FORCEINLINE void shard_of(std::size_t count, int members, int k,
                                                std::size_t& first, std::size_t& last) {
  constexpr std::size_t V = 16 / sizeof(T);
  const std::size_t per = ((count + members - 1) / members + V - 1) / V * V;
  first = per * static_cast<std::size_t>(k);
  if (first > count) first = count;
  last = first + per > count ? count : first + per;
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
  detail::team_exchange(comm, round.channel, detail::exchange_value(round.epoch, 2 * round.step),
                        "ccl sync");
}

template <class T>
IRIS_DEVICE_FN void all_gather(iris::block group, const Communicator& comm, Round round, T* dst,
                               const T* src, std::size_t count, Algorithm algorithm) {
  const std::uint64_t entry = detail::exchange_value(round.epoch, 2 * round.step);
  detail::team_exchange(comm, round.channel, entry, "ccl all_gather (entry)");
  // In place (on every member), member k's part already sits at dst + k * count on member k.
  const bool in_place = src == dst + static_cast<std::size_t>(comm.index) * count;
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
  detail::team_exchange(comm, round.channel, entry + 1, "ccl all_gather (exit)");
}

template <class T>
IRIS_DEVICE_FN void reduce_scatter(iris::block, const Communicator& comm, Round round, T* dst,
                                   const T* src, std::size_t count, ReduceOp op) {
  const std::uint64_t entry = detail::exchange_value(round.epoch, 2 * round.step);
  detail::team_exchange(comm, round.channel, entry, "ccl reduce_scatter (entry)");
  detail::reduce_span(comm, dst, false, src + static_cast<std::size_t>(comm.index) * count, count,
                      op);
  detail::team_exchange(comm, round.channel, entry + 1, "ccl reduce_scatter (exit)");
}

template <class T>
IRIS_DEVICE_FN void all_reduce(iris::block, const Communicator& comm, Round round, T* dst,
                               const T* src, std::size_t count, ReduceOp op, Algorithm algorithm) {
  const std::uint64_t entry = detail::exchange_value(round.epoch, 2 * round.step);
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
