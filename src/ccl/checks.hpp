// Argument checks of iris::ccl calls: plain functions of numbers and address ranges, so that the
// CPU tests exercise every message. Each throws iris::Error(kInvalidArgument) naming the call,
// the argument and what is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "iris/device/team.hpp"

namespace iris::ccl::detail {

/// The symmetric heap as this rank sees it: user buffers lie in [begin, end).
struct HeapRange {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
};

/// The team fits the world, has this rank, and is no larger than the workspace supports.
void check_team(const iris::team& team, int world_size, int rank);

/// count * element bytes, or an error naming `call` when it overflows.
std::size_t checked_bytes(std::size_t count, std::size_t element, const char* call);
/// a * b for sizes, or an error naming `call`.
std::size_t checked_product(std::size_t a, std::size_t b, const char* call);

/// `ptr`..`ptr + bytes` lies on the symmetric heap; `name` is the argument's name.
void check_on_heap(const HeapRange& heap, const void* ptr, std::size_t bytes, const char* call,
                   const char* name);

/// 0 <= root < team_size.
void check_root(int root, int team_size, const char* call, const char* name = "root");

/// The two ranges either do not overlap or are exactly the in-place arrangement the call takes
/// (`in_place_ok` says whether a == b is that arrangement).
void check_aliasing(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes,
                    bool in_place_ok, const char* call, const char* a_name, const char* b_name,
                    const char* in_place_rule);

/// What every member of a team must agree on when it makes its communicator (a call's kernels
/// on every member take the same grids and the same workspace layout from them).
struct CommunicatorSetup {
  std::int32_t team_start = 0, team_size = 0, team_stride = 0;
  std::int32_t threads = 0;
  std::int32_t move_in_flight = 0;  ///< the movement kernel's vectors in flight
  std::uint64_t packet_bytes = 0, staging_bytes = 0;
  std::uint64_t selection = 0;  ///< a hash of the selection table and IRIS_CCL_ALGORITHM
};

/// A stable 64-bit hash of `text` (FNV-1a), the same in every process and build.
std::uint64_t stable_hash(std::string_view text, std::uint64_t seed = 14695981039346656037ull);

/// Every member of `team` (world ranks `team.world_rank(k)` in `all`, which holds every world
/// rank's setup) made its communicator with `all[rank]`'s team and settings, or an error naming
/// the first that differs, the member and both values. Each member sees the same difference,
/// so every member throws (none is left waiting).
void check_setups_agree(const std::vector<CommunicatorSetup>& all, const iris::team& team,
                        int rank);

/// Readable "0x7f..." for messages.
std::string address(const void* ptr);

}  // namespace iris::ccl::detail
