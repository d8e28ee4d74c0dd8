// How a collective cuts a part's elements into one shard per team member, shared by the host
// collectives (src/ccl) and the tile collectives (device_impl.hpp), which must agree on it.
// Host C++; the device uses it through --expt-relaxed-constexpr. Not public.
#pragma once

#include <cstddef>

namespace iris::ccl::detail {

/// Elements of each shard when `count` elements of `element_bytes` bytes (1, 2, 4, 8 or 16)
/// are cut into `members` shards whose starts stay 16-byte aligned: member k's shard starts at
/// k * shard_elements(...), and the last shards may be short or empty. At most `count`.
constexpr std::size_t shard_elements(std::size_t count, int members, std::size_t element_bytes) {
  const std::size_t vector = 16 / element_bytes;
  const auto m = static_cast<std::size_t>(members);
  const std::size_t per = ((count + m - 1) / m + vector - 1) / vector * vector;
  return per < count ? per : count;
}

static_assert(shard_elements(10, 4, 4) == 4 && shard_elements(3, 4, 4) == 3 &&
              shard_elements(1000, 3, 2) == 336 && shard_elements(0, 2, 4) == 0);

}  // namespace iris::ccl::detail
