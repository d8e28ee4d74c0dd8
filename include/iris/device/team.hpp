// iris::team: a subset of the world's ranks that runs a barrier or a collective together, as
// NCCL's ncclTeam and ROCm Iris's groups: a tensor-parallel group inside a larger job.
//
//   const iris::team tp{.start = 4 * (ctx.rank() / 4), .size = 4, .stride = 1};  // 4 per group
//   const iris::team evens{.start = 0, .size = ctx.world_size() / 2, .stride = 2};
//   for (int i = 0; i < tp.size; ++i) peer = tp.world_rank(i);
//
// Member i of the team is world rank start + i * stride. A team is a plain value: every member
// constructs the same one, nothing is registered. The world is team::world(world_size).
#pragma once

#include "iris/device/detail/config.hpp"

namespace iris {

struct team {
  int start = 0;   ///< world rank of member 0
  int size = 1;    ///< members, at least 1
  int stride = 1;  ///< world-rank distance between consecutive members, at least 1

  /// Every rank of a world of `world_size` ranks.
  IRIS_HOST_DEVICE static constexpr team world(int world_size) { return {0, world_size, 1}; }

  /// World rank of member `index` (0 <= index < size).
  IRIS_HOST_DEVICE constexpr int world_rank(int index) const { return start + index * stride; }

  /// Index in the team of `world_rank`, or -1 when it is not a member.
  IRIS_HOST_DEVICE constexpr int index_of(int world_rank) const {
    const int offset = world_rank - start;
    if (offset < 0 || offset % stride != 0) return -1;
    const int index = offset / stride;
    return index < size ? index : -1;
  }

  IRIS_HOST_DEVICE constexpr bool contains(int world_rank) const {
    return index_of(world_rank) >= 0;
  }

  /// True when every member is a rank of a world of `world_size` ranks.
  IRIS_HOST_DEVICE constexpr bool fits(int world_size) const {
    return size >= 1 && stride >= 1 && start >= 0 &&
           static_cast<long long>(start) + static_cast<long long>(size - 1) * stride < world_size;
  }

  friend IRIS_HOST_DEVICE constexpr bool operator==(const team&, const team&) = default;
};

}  // namespace iris
