// HeapAllocator: hands out byte ranges of one rank's symmetric heap.
//
// Symmetric allocation only works if every rank gets the same offset for the same call, so the
// allocator is a pure function of the sequence of calls made on it: it works on offsets (never
// on addresses), keeps its free blocks in ordered containers (never hashed), and breaks every
// tie by the lower offset.
//
// Placement policy: best fit. Among the free blocks that can hold the request at the requested
// alignment, the smallest is chosen (the lowest offset among equal sizes), and the allocation
// takes the first aligned offset inside it; what is left on either side stays free. Best fit
// and address-ordered first fit fragment about equally little on real workloads, and both are
// deterministic; best fit wins because a size-ordered index finds its block in O(log n), where
// first fit needs a scan (or an augmented tree) over the free blocks in address order.
//
// Sizes are rounded up to kGranularity, so every block starts and ends on a granule boundary
// and the common request (alignment <= kGranularity) fits at the front of any large enough
// block. A zero-byte request is rounded up to one granule too: like malloc(0) it gets a unique
// offset that must be freed, which keeps "one offset, one live allocation" true without a
// special case in callers.
//
// Freed blocks are merged with free neighbours at once, so the free blocks are always the
// maximal gaps between live allocations: the state depends only on which allocations are live,
// and allocate-then-free restores it exactly.
//
// Every operation is O(log n) in the number of blocks (allocations with an alignment above
// kGranularity may look at a few more candidate blocks). Not thread-safe: the owner serialises
// calls, as collective allocation does anyway.
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <utility>

namespace iris::detail {

class HeapAllocator {
 public:
  /// Size and alignment unit of every allocation; smaller alignments are raised to it.
  static constexpr std::size_t kGranularity = 256;

  /// Manages the offsets [begin, end) of a heap. begin must be above 0 (the first bytes of every
  /// heap are Iris's own) and both ends multiples of kGranularity; anything else throws
  /// iris::Error(kInvalidArgument).
  HeapAllocator(std::size_t begin, std::size_t end);

  /// Reserves `bytes` bytes (rounded up to kGranularity; 0 counts as one granule) at an offset
  /// that is a multiple of `alignment`, and returns the offset. `alignment` must be a power of
  /// two (else iris::Error(kInvalidArgument)); values below kGranularity mean kGranularity.
  /// Alignment is of the offset: pointers share it up to the heap base's own alignment.
  /// Throws iris::Error(kOutOfMemory), describing the heap's state, when no free block fits.
  std::size_t allocate(std::size_t bytes, std::size_t alignment = kGranularity);

  /// Releases the allocation that starts at `offset`. An offset that allocate did not return,
  /// or one already freed, throws iris::Error(kInvalidArgument) and changes nothing.
  void free(std::size_t offset);

  /// True when `offset` is the start of a live allocation.
  bool is_live(std::size_t offset) const { return live_.contains(offset); }
  /// The byte count that was asked for when the live allocation at `offset` was made (0 for a
  /// zero-byte request). Throws iris::Error(kInvalidArgument) for any other offset.
  std::size_t size_of(std::size_t offset) const;

  std::size_t begin() const noexcept { return begin_; }
  std::size_t end() const noexcept { return end_; }
  /// Bytes this allocator manages: end() - begin().
  std::size_t capacity() const noexcept { return end_ - begin_; }
  /// Bytes held by live allocations, each counted rounded up to kGranularity.
  std::size_t bytes_in_use() const noexcept { return bytes_in_use_; }
  /// Number of live allocations.
  std::size_t live_count() const noexcept { return live_.size(); }
  /// Size of the largest free block: no request larger than this can succeed.
  std::size_t largest_free_block() const noexcept;
  /// Number of free blocks; 1 on an empty heap, since neighbours are merged.
  std::size_t free_block_count() const noexcept { return free_by_offset_.size(); }

 private:
  struct LiveAllocation {
    std::size_t reserved;   // bytes the allocation holds, a multiple of kGranularity
    std::size_t requested;  // bytes the caller asked for
  };

  void insert_free_block(std::size_t offset, std::size_t size);
  void erase_free_block(std::map<std::size_t, std::size_t>::iterator block);
  [[noreturn]] void throw_out_of_memory(std::size_t bytes, std::size_t alignment) const;
  [[noreturn]] void throw_not_live(std::size_t offset, const char* operation) const;

  std::size_t begin_;
  std::size_t end_;
  std::size_t bytes_in_use_ = 0;
  // Free blocks, twice: by offset (to find neighbours when merging) and by (size, offset) for
  // best fit. Both always hold the same blocks.
  std::map<std::size_t, std::size_t> free_by_offset_;
  std::set<std::pair<std::size_t, std::size_t>> free_by_size_;
  std::map<std::size_t, LiveAllocation> live_;
};

}  // namespace iris::detail
