#include "detail/allocator.hpp"

#include <algorithm>
#include <iterator>
#include <string>

#include "detail/format.hpp"
#include "iris/host/error.hpp"

namespace iris::detail {

namespace {

bool is_power_of_two(std::size_t value) {
  return value != 0 && (value & (value - 1)) == 0;
}

std::string range_text(std::size_t begin, std::size_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

}  // namespace

HeapAllocator::HeapAllocator(std::size_t begin, std::size_t end) : begin_(begin), end_(end) {
  if (begin == 0)
    throw Error(Errc::kInvalidArgument,
                "heap allocator range " + range_text(begin, end) +
                    " starts at offset 0, but the first bytes of the heap are reserved by Iris");
  if (begin >= end)
    throw Error(Errc::kInvalidArgument,
                "heap allocator range " + range_text(begin, end) + " is empty");
  if (begin % kGranularity != 0 || end % kGranularity != 0)
    throw Error(Errc::kInvalidArgument, "heap allocator range " + range_text(begin, end) +
                                            " must start and end on multiples of " +
                                            std::to_string(kGranularity) + " bytes");
  insert_free_block(begin, end - begin);
}

std::size_t HeapAllocator::allocate(std::size_t bytes, std::size_t alignment) {
  if (!is_power_of_two(alignment))
    throw Error(Errc::kInvalidArgument,
                "alignment " + std::to_string(alignment) +
                    " is not a power of two; symmetric allocations take a power-of-two alignment "
                    "(values below " +
                    std::to_string(kGranularity) + " mean " + std::to_string(kGranularity) + ")");
  const std::size_t effective_alignment = std::max(alignment, kGranularity);
  // Checked before rounding so that a huge request cannot overflow; capacity() is a multiple of
  // the granule, so anything that passes rounds up to at most capacity().
  if (bytes > capacity()) throw_out_of_memory(bytes, effective_alignment);
  const std::size_t reserved =
      bytes == 0 ? kGranularity : (bytes + kGranularity - 1) / kGranularity * kGranularity;

  // Blocks come in (size, offset) order, so the first one that fits is the best fit. Every block
  // starts on a granule, so for alignments up to the granule the first candidate fits; larger
  // alignments skip at most the blocks smaller than reserved + alignment - granule.
  for (auto candidate = free_by_size_.lower_bound({reserved, 0}); candidate != free_by_size_.end();
       ++candidate) {
    const auto [block_size, block_offset] = *candidate;
    const std::size_t padding =
        (effective_alignment - block_offset % effective_alignment) % effective_alignment;
    if (padding > block_size || reserved > block_size - padding) continue;

    const std::size_t offset = block_offset + padding;
    const std::size_t tail = block_size - padding - reserved;
    erase_free_block(free_by_offset_.find(block_offset));
    if (padding > 0) insert_free_block(block_offset, padding);
    if (tail > 0) insert_free_block(offset + reserved, tail);
    live_.emplace(offset, LiveAllocation{reserved, bytes});
    bytes_in_use_ += reserved;
    return offset;
  }
  throw_out_of_memory(bytes, effective_alignment);
}

void HeapAllocator::free(std::size_t offset) {
  const auto allocation = live_.find(offset);
  if (allocation == live_.end()) throw_not_live(offset, "free");
  const std::size_t reserved = allocation->second.reserved;

  // No free block starts at a live offset, so `after` is the first free block above it and the
  // one before `after` is the closest below it.
  std::size_t merged_offset = offset;
  std::size_t merged_size = reserved;
  const auto after = free_by_offset_.lower_bound(offset);
  if (after != free_by_offset_.begin()) {
    const auto before = std::prev(after);
    if (before->first + before->second == offset) {
      merged_offset = before->first;
      merged_size += before->second;
      erase_free_block(before);
    }
  }
  if (after != free_by_offset_.end() && after->first == offset + reserved) {
    merged_size += after->second;
    erase_free_block(after);
  }
  insert_free_block(merged_offset, merged_size);
  bytes_in_use_ -= reserved;
  live_.erase(allocation);
}

std::size_t HeapAllocator::size_of(std::size_t offset) const {
  const auto allocation = live_.find(offset);
  if (allocation == live_.end()) throw_not_live(offset, "query the size of");
  return allocation->second.requested;
}

std::size_t HeapAllocator::largest_free_block() const noexcept {
  return free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
}

void HeapAllocator::insert_free_block(std::size_t offset, std::size_t size) {
  free_by_offset_.emplace(offset, size);
  free_by_size_.emplace(size, offset);
}

void HeapAllocator::erase_free_block(std::map<std::size_t, std::size_t>::iterator block) {
  free_by_size_.erase({block->second, block->first});
  free_by_offset_.erase(block);
}

void HeapAllocator::throw_out_of_memory(std::size_t bytes, std::size_t alignment) const {
  const std::size_t free_bytes = capacity() - bytes_in_use_;
  std::string message = "cannot allocate " + format_byte_count(bytes) + " with alignment " +
                        format_bytes(alignment) + ": the symmetric heap has " +
                        format_bytes(capacity()) + " for allocations, " +
                        format_bytes(bytes_in_use_) + " in use by " + std::to_string(live_count()) +
                        (live_count() == 1 ? " allocation" : " allocations") +
                        ", largest free block " + format_bytes(largest_free_block());
  if (bytes <= largest_free_block())
    message += " (large enough, but not at this alignment)";
  else if (bytes <= free_bytes)
    message += " (" + format_bytes(free_bytes) + " free in total, split into " +
               std::to_string(free_block_count()) +
               " blocks by live allocations: free unused allocations, or make long-lived ones "
               "first)";
  message += "; raise IRIS_HEAP_SIZE";
  throw Error(Errc::kOutOfMemory, message);
}

void HeapAllocator::throw_not_live(std::size_t offset, const char* operation) const {
  std::string message =
      std::string("cannot ") + operation + " offset " + std::to_string(offset) + ": ";
  if (offset < begin_ || offset >= end_) {
    message += "it is outside the allocatable range " + range_text(begin_, end_) +
               " of the symmetric heap";
  } else {
    const auto next = live_.upper_bound(offset);
    const auto holder = next == live_.begin() ? live_.end() : std::prev(next);
    if (holder != live_.end() && offset < holder->first + holder->second.reserved)
      message += "it lies inside the allocation at offset " + std::to_string(holder->first) + " (" +
                 format_byte_count(holder->second.requested) +
                 "); pass the offset that allocate returned";
    else
      message += "it is not a live allocation (already freed, or never returned by allocate)";
  }
  throw Error(Errc::kInvalidArgument, message);
}

}  // namespace iris::detail
