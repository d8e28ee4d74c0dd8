// Argument checks of iris::ccl calls: plain functions of numbers and address ranges, so that the
// CPU tests exercise every message. Each throws iris::Error(kInvalidArgument) naming the call,
// the argument and what is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

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

/// Readable "0x7f..." for messages.
std::string address(const void* ptr);

}  // namespace iris::ccl::detail
