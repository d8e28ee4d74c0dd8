// HeapAllocator against a reference model, its error paths, and format_bytes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "detail/allocator.hpp"
#include "detail/format.hpp"
#include "iris/host/error.hpp"

namespace {

using iris::Errc;
using iris::detail::format_byte_count;
using iris::detail::format_bytes;
using iris::detail::HeapAllocator;
using testing::HasSubstr;

constexpr std::size_t kGranule = HeapAllocator::kGranularity;
constexpr std::size_t KiB = std::size_t{1} << 10;
constexpr std::size_t MiB = std::size_t{1} << 20;
constexpr std::size_t GiB = std::size_t{1} << 30;

// Runs `call`, which must throw iris::Error, and returns the error.
template <class Call>
std::optional<iris::Error> error_from(Call&& call) {
  try {
    call();
  } catch (const iris::Error& error) {
    return error;
  }
  ADD_FAILURE() << "expected an iris::Error";
  return std::nullopt;
}

std::size_t round_to_granule(std::size_t bytes) {
  return bytes == 0 ? kGranule : (bytes + kGranule - 1) / kGranule * kGranule;
}

// The allocator's contract written the slow, obvious way: the occupied intervals, and best fit
// found by looking at every gap between them.
class ReferenceHeap {
 public:
  ReferenceHeap(std::size_t begin, std::size_t end) : begin_(begin), end_(end) {}

  struct Gap {
    std::size_t offset;
    std::size_t size;
  };

  std::vector<Gap> gaps() const {
    std::vector<Gap> result;
    std::size_t cursor = begin_;
    for (const auto& [offset, size] : occupied_) {
      if (offset > cursor) result.push_back({cursor, offset - cursor});
      cursor = offset + size;
    }
    if (end_ > cursor) result.push_back({cursor, end_ - cursor});
    return result;
  }

  // Where best fit puts `reserved` bytes at `alignment`: the smallest gap that can hold them,
  // the lowest such gap among equals, at its first aligned offset.
  std::optional<std::size_t> best_fit(std::size_t reserved, std::size_t alignment) const {
    std::optional<Gap> best;
    for (const Gap& gap : gaps()) {
      const std::size_t aligned = (gap.offset + alignment - 1) / alignment * alignment;
      if (aligned + reserved > gap.offset + gap.size) continue;
      if (!best || gap.size < best->size) best = gap;
    }
    if (!best) return std::nullopt;
    return (best->offset + alignment - 1) / alignment * alignment;
  }

  void occupy(std::size_t offset, std::size_t reserved) {
    ASSERT_GE(offset, begin_);
    ASSERT_LE(offset + reserved, end_);
    const auto next = occupied_.lower_bound(offset);
    if (next != occupied_.end()) {
      ASSERT_LE(offset + reserved, next->first) << "overlap";
    }
    if (next != occupied_.begin()) {
      const auto previous = std::prev(next);
      ASSERT_LE(previous->first + previous->second, offset) << "overlap";
    }
    occupied_.emplace(offset, reserved);
    in_use_ += reserved;
  }

  void release(std::size_t offset) {
    in_use_ -= occupied_.at(offset);
    occupied_.erase(offset);
  }

  std::size_t in_use() const { return in_use_; }
  std::size_t live_count() const { return occupied_.size(); }
  std::size_t largest_gap() const {
    std::size_t largest = 0;
    for (const Gap& gap : gaps()) largest = std::max(largest, gap.size);
    return largest;
  }

 private:
  std::size_t begin_;
  std::size_t end_;
  std::map<std::size_t, std::size_t> occupied_;
  std::size_t in_use_ = 0;
};

// A random mix of small, medium and large requests (with zero-byte ones among the small) and
// alignments from below the granule up to 1 MiB.
struct RandomRequests {
  explicit RandomRequests(std::uint64_t seed) : engine(seed) {}

  std::size_t bytes() {
    const int kind = std::uniform_int_distribution<int>(0, 99)(engine);
    if (kind < 50) return std::uniform_int_distribution<std::size_t>(0, 4 * KiB)(engine);
    if (kind < 85) return std::uniform_int_distribution<std::size_t>(4 * KiB, 256 * KiB)(engine);
    return std::uniform_int_distribution<std::size_t>(256 * KiB, 4 * MiB)(engine);
  }

  std::size_t alignment() {
    static constexpr std::array<std::size_t, 10> kChoices = {1,   8,   256,     256,      256,
                                                             256, 512, 4 * KiB, 64 * KiB, 1 * MiB};
    return kChoices[std::uniform_int_distribution<std::size_t>(0, kChoices.size() - 1)(engine)];
  }

  bool wants_allocation() { return std::uniform_int_distribution<int>(0, 99)(engine) < 55; }

  std::size_t pick(std::size_t count) {
    return std::uniform_int_distribution<std::size_t>(0, count - 1)(engine);
  }

  std::mt19937_64 engine;
};

TEST(FormatBytes, IsShortAndReadable) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(256), "256 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(KiB), "1.0 KiB");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(10 * KiB), "10 KiB");
  EXPECT_EQ(format_bytes(768 * MiB), "768 MiB");
  EXPECT_EQ(format_bytes(GiB), "1.0 GiB");
  EXPECT_EQ(format_bytes(3 * GiB), "3.0 GiB");
  EXPECT_EQ(format_bytes(std::numeric_limits<std::size_t>::max()), "16 EiB");
}

TEST(FormatBytes, RoundingCarriesIntoTheNextUnit) {
  EXPECT_EQ(format_bytes(MiB - 1), "1.0 MiB");
  EXPECT_EQ(format_bytes(10 * KiB - 1), "10 KiB");
}

TEST(FormatBytes, ExactCountKeepsEveryByte) {
  EXPECT_EQ(format_byte_count(1000), "1000 B");
  EXPECT_EQ(format_byte_count(4097), "4097 B");
  EXPECT_EQ(format_byte_count(MiB + 1), "1048577 B = 1.0 MiB");
}

TEST(HeapAllocator, RejectsRangesItCannotManage) {
  auto error = error_from([] { HeapAllocator(0, MiB); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code(), Errc::kInvalidArgument);
  EXPECT_THAT(error->message(), HasSubstr("reserved by Iris"));

  error = error_from([] { HeapAllocator(MiB, MiB); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code(), Errc::kInvalidArgument);
  EXPECT_THAT(error->message(), HasSubstr("[1048576, 1048576) is empty"));

  error = error_from([] { HeapAllocator(MiB + 1, 2 * MiB); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code(), Errc::kInvalidArgument);
  EXPECT_THAT(error->message(), HasSubstr("multiples of 256 bytes"));
}

TEST(HeapAllocator, StartsEmpty) {
  const HeapAllocator allocator(MiB, 5 * MiB);
  EXPECT_EQ(allocator.begin(), MiB);
  EXPECT_EQ(allocator.end(), 5 * MiB);
  EXPECT_EQ(allocator.capacity(), 4 * MiB);
  EXPECT_EQ(allocator.bytes_in_use(), 0u);
  EXPECT_EQ(allocator.live_count(), 0u);
  EXPECT_EQ(allocator.largest_free_block(), 4 * MiB);
  EXPECT_EQ(allocator.free_block_count(), 1u);
}

TEST(HeapAllocator, PacksRequestsFromTheBeginningInGranules) {
  HeapAllocator allocator(MiB, 2 * MiB);
  EXPECT_EQ(allocator.allocate(100), MiB);
  EXPECT_EQ(allocator.allocate(256), MiB + 256);
  EXPECT_EQ(allocator.allocate(257), MiB + 512);
  EXPECT_EQ(allocator.allocate(1), MiB + 1024);
  EXPECT_EQ(allocator.bytes_in_use(), 1280u);
  EXPECT_EQ(allocator.live_count(), 4u);
  EXPECT_EQ(allocator.size_of(MiB), 100u);
  EXPECT_EQ(allocator.size_of(MiB + 512), 257u);
}

TEST(HeapAllocator, ZeroByteRequestsGetTheirOwnGranule) {
  HeapAllocator allocator(MiB, 2 * MiB);
  const std::size_t first = allocator.allocate(0);
  const std::size_t second = allocator.allocate(0);
  EXPECT_NE(first, second);
  EXPECT_EQ(allocator.size_of(first), 0u);
  EXPECT_EQ(allocator.bytes_in_use(), 2 * kGranule);
  allocator.free(first);
  allocator.free(second);
  EXPECT_EQ(allocator.live_count(), 0u);
  EXPECT_EQ(allocator.largest_free_block(), allocator.capacity());
}

TEST(HeapAllocator, AlignmentsBelowTheGranuleMeanTheGranule) {
  HeapAllocator allocator(MiB, 2 * MiB);
  allocator.allocate(10, 1);
  EXPECT_EQ(allocator.allocate(10, 8), MiB + kGranule);
  EXPECT_EQ(allocator.allocate(10, 128), MiB + 2 * kGranule);
}

TEST(HeapAllocator, LargeAlignmentLeavesThePaddingFree) {
  HeapAllocator allocator(MiB, 4 * MiB);
  const std::size_t small = allocator.allocate(100);
  const std::size_t aligned = allocator.allocate(4 * KiB, 2 * MiB);
  EXPECT_EQ(small, MiB);
  EXPECT_EQ(aligned, 2 * MiB);
  EXPECT_EQ(allocator.bytes_in_use(), kGranule + 4 * KiB);
  // The padding between them is a free block that later requests use.
  EXPECT_EQ(allocator.allocate(MiB - kGranule), MiB + kGranule);
}

TEST(HeapAllocator, RejectsAlignmentsThatAreNotPowersOfTwo) {
  for (const std::size_t alignment : {std::size_t{0}, std::size_t{3}, std::size_t{384},
                                      std::numeric_limits<std::size_t>::max()}) {
    HeapAllocator allocator(MiB, 2 * MiB);
    const auto error = error_from([&] { allocator.allocate(64, alignment); });
    ASSERT_TRUE(error);
    EXPECT_EQ(error->code(), Errc::kInvalidArgument);
    EXPECT_THAT(error->message(),
                HasSubstr("alignment " + std::to_string(alignment) + " is not a power of two"));
    EXPECT_EQ(allocator.live_count(), 0u);
  }
}

TEST(HeapAllocator, FreeRejectsOffsetsThatAreNotLiveAndChangesNothing) {
  HeapAllocator allocator(MiB, 2 * MiB);
  const std::size_t kept = allocator.allocate(4 * KiB);
  const std::size_t freed = allocator.allocate(100);
  allocator.free(freed);

  struct Case {
    std::size_t offset;
    std::string says;
  };
  const std::vector<Case> cases = {
      {freed, "not a live allocation (already freed"},           // double free
      {kept + 1024, "inside the allocation at offset 1048576"},  // not the start
      {MiB + 512 * KiB, "not a live allocation"},                // never allocated
      {0, "outside the allocatable range [1048576, 2097152)"},
      {2 * MiB, "outside the allocatable range"},
  };
  for (const Case& c : cases) {
    const auto error = error_from([&] { allocator.free(c.offset); });
    ASSERT_TRUE(error);
    EXPECT_EQ(error->code(), Errc::kInvalidArgument);
    EXPECT_THAT(error->message(), HasSubstr("cannot free offset " + std::to_string(c.offset)));
    EXPECT_THAT(error->message(), HasSubstr(c.says));
  }
  EXPECT_EQ(allocator.live_count(), 1u);
  EXPECT_EQ(allocator.bytes_in_use(), 4 * KiB);
  EXPECT_TRUE(allocator.is_live(kept));
  EXPECT_FALSE(allocator.is_live(freed));
}

TEST(HeapAllocator, SizeOfRejectsOffsetsThatAreNotLive) {
  HeapAllocator allocator(MiB, 2 * MiB);
  const std::size_t offset = allocator.allocate(1000);
  const auto error = error_from([&] { allocator.size_of(offset + 256); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code(), Errc::kInvalidArgument);
  EXPECT_THAT(error->message(),
              HasSubstr("cannot query the size of offset " + std::to_string(offset + 256)));
}

TEST(HeapAllocator, CoalescesNeighboursInEveryFreeOrder) {
  std::array<int, 3> order = {0, 1, 2};
  do {
    HeapAllocator allocator(MiB, 2 * MiB);
    const std::array<std::size_t, 3> offsets = {allocator.allocate(256 * KiB),
                                                allocator.allocate(256 * KiB),
                                                allocator.allocate(512 * KiB)};
    EXPECT_EQ(allocator.largest_free_block(), 0u);
    for (const int which : order) allocator.free(offsets[which]);
    EXPECT_EQ(allocator.free_block_count(), 1u);
    EXPECT_EQ(allocator.allocate(allocator.capacity()), allocator.begin());
  } while (std::next_permutation(order.begin(), order.end()));
}

TEST(HeapAllocator, BestFitTakesTheSmallestBlockThatFits) {
  HeapAllocator allocator(MiB, 2 * MiB);
  // Free blocks of 3, 1 and 2 granules, separated by live ones, then the rest of the heap.
  std::vector<std::size_t> offsets;
  for (const std::size_t granules : {3, 1, 1, 1, 2, 1})
    offsets.push_back(allocator.allocate(granules * kGranule));
  allocator.free(offsets[0]);
  allocator.free(offsets[2]);
  allocator.free(offsets[4]);
  EXPECT_EQ(allocator.allocate(kGranule), offsets[2]);      // the 1-granule hole
  EXPECT_EQ(allocator.allocate(kGranule), offsets[4]);      // then the smaller of 3 and 2
  EXPECT_EQ(allocator.allocate(2 * kGranule), offsets[0]);  // 3 granules beat the tail
}

TEST(HeapAllocator, EqualBlocksAreTakenLowestOffsetFirst) {
  HeapAllocator allocator(MiB, 2 * MiB);
  std::vector<std::size_t> offsets;
  for (int i = 0; i < 6; ++i) offsets.push_back(allocator.allocate(kGranule));
  allocator.free(offsets[3]);
  allocator.free(offsets[1]);
  EXPECT_EQ(allocator.allocate(kGranule), offsets[1]);
  EXPECT_EQ(allocator.allocate(kGranule), offsets[3]);
}

TEST(HeapAllocator, OutOfMemoryDescribesTheRequestAndTheHeap) {
  HeapAllocator allocator(MiB, MiB + GiB);
  for (int i = 0; i < 12; ++i) allocator.allocate(64 * MiB);
  const auto error = error_from([&] { allocator.allocate(3 * GiB); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code(), Errc::kOutOfMemory);
  EXPECT_EQ(error->message(),
            "cannot allocate 3221225472 B = 3.0 GiB with alignment 256 B: the symmetric heap has "
            "1.0 GiB for allocations, 768 MiB in use by 12 allocations, largest free block 256 "
            "MiB; raise IRIS_HEAP_SIZE");
  EXPECT_EQ(allocator.live_count(), 12u);
}

TEST(HeapAllocator, OutOfMemorySaysWhenTheFreeSpaceIsFragmented) {
  HeapAllocator allocator(MiB, 2 * MiB);
  std::vector<std::size_t> offsets;
  for (int i = 0; i < 8; ++i) offsets.push_back(allocator.allocate(128 * KiB));
  for (int i = 0; i < 8; i += 2) allocator.free(offsets[i]);
  const auto error = error_from([&] { allocator.allocate(256 * KiB, 4 * KiB); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code(), Errc::kOutOfMemory);
  EXPECT_THAT(error->message(), HasSubstr("cannot allocate 262144 B with alignment 4.0 KiB"));
  EXPECT_THAT(error->message(), HasSubstr("512 KiB in use by 4 allocations"));
  EXPECT_THAT(error->message(), HasSubstr("largest free block 128 KiB"));
  EXPECT_THAT(error->message(), HasSubstr("512 KiB free in total, split into 4 blocks"));
}

TEST(HeapAllocator, OutOfMemorySaysWhenOnlyTheAlignmentDoesNotFit) {
  HeapAllocator allocator(kGranule, kGranule + 8 * KiB);
  const auto error = error_from([&] { allocator.allocate(8 * KiB - kGranule, 8 * KiB); });
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code(), Errc::kOutOfMemory);
  EXPECT_THAT(error->message(), HasSubstr("with alignment 8.0 KiB"));
  EXPECT_THAT(error->message(), HasSubstr("but not at this alignment"));
  EXPECT_THAT(error->message(), HasSubstr("0 B in use by 0 allocations"));
}

TEST(HeapAllocator, HugeRequestsFailCleanly) {
  HeapAllocator allocator(MiB, 2 * MiB);
  constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();
  for (const auto& [bytes, alignment] :
       std::vector<std::pair<std::size_t, std::size_t>>{{kMax, kGranule},
                                                        {kMax - 100, kGranule},
                                                        {MiB + 1, kGranule},
                                                        {kGranule, std::size_t{1} << 63}}) {
    const auto error = error_from([&] { allocator.allocate(bytes, alignment); });
    ASSERT_TRUE(error);
    EXPECT_EQ(error->code(), Errc::kOutOfMemory) << bytes << " " << alignment;
    EXPECT_THAT(error->message(), HasSubstr("cannot allocate " + std::to_string(bytes) + " B"));
  }
  EXPECT_EQ(allocator.allocate(MiB), MiB);
}

// Tens of thousands of random allocate/free calls, each checked against the reference model:
// the exact offset best fit must give, alignment, bounds, no overlap, the counters, and that
// free blocks are always merged (as many free blocks as the model has gaps).
class RandomSequence : public testing::TestWithParam<std::uint64_t> {};

TEST_P(RandomSequence, MatchesTheReferenceModel) {
  constexpr std::size_t kBegin = MiB;
  constexpr std::size_t kEnd = kBegin + 32 * MiB;
  constexpr int kOperations = 20000;
  HeapAllocator allocator(kBegin, kEnd);
  ReferenceHeap model(kBegin, kEnd);
  RandomRequests random(GetParam());
  std::vector<std::size_t> live;
  int out_of_memory = 0;

  for (int step = 0; step < kOperations; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    if (live.empty() || random.wants_allocation()) {
      const std::size_t bytes = random.bytes();
      const std::size_t alignment = random.alignment();
      const std::size_t effective_alignment = std::max(alignment, kGranule);
      const auto expected = model.best_fit(round_to_granule(bytes), effective_alignment);
      if (!expected) {
        const auto error = error_from([&] { allocator.allocate(bytes, alignment); });
        ASSERT_TRUE(error);
        ASSERT_EQ(error->code(), Errc::kOutOfMemory);
        ++out_of_memory;
        continue;
      }
      const std::size_t offset = allocator.allocate(bytes, alignment);
      ASSERT_EQ(offset, *expected);
      ASSERT_EQ(offset % effective_alignment, 0u);
      ASSERT_EQ(allocator.size_of(offset), bytes);
      model.occupy(offset, round_to_granule(bytes));
      live.push_back(offset);
    } else {
      const std::size_t index = random.pick(live.size());
      allocator.free(live[index]);
      model.release(live[index]);
      live[index] = live.back();
      live.pop_back();
    }
    ASSERT_EQ(allocator.bytes_in_use(), model.in_use());
    ASSERT_EQ(allocator.live_count(), model.live_count());
    ASSERT_EQ(allocator.largest_free_block(), model.largest_gap());
    ASSERT_EQ(allocator.free_block_count(), model.gaps().size());
  }
  // The sequence must have filled the heap, or the out-of-memory path went untested.
  EXPECT_GT(out_of_memory, 0);

  for (const std::size_t offset : live) allocator.free(offset);
  EXPECT_EQ(allocator.bytes_in_use(), 0u);
  EXPECT_EQ(allocator.free_block_count(), 1u);
  EXPECT_EQ(allocator.allocate(allocator.capacity()), kBegin);
}

INSTANTIATE_TEST_SUITE_P(Seeds, RandomSequence, testing::Values(1, 2, 3, 42, 20240601));

// What each call of a random sequence returned: an offset, or the error code it threw.
std::vector<std::string> replay(HeapAllocator& allocator, std::uint64_t seed, int operations) {
  RandomRequests random(seed);
  std::vector<std::size_t> live;
  std::vector<std::string> results;
  for (int step = 0; step < operations; ++step) {
    if (live.empty() || random.wants_allocation()) {
      try {
        live.push_back(allocator.allocate(random.bytes(), random.alignment()));
        results.push_back(std::to_string(live.back()));
      } catch (const iris::Error& error) {
        results.push_back(std::string(iris::to_string(error.code())));
      }
    } else {
      const std::size_t index = random.pick(live.size());
      allocator.free(live[index]);
      results.push_back("free " + std::to_string(live[index]));
      live[index] = live.back();
      live.pop_back();
    }
  }
  return results;
}

TEST(HeapAllocator, SameSequenceGivesSameOffsets) {
  for (const std::uint64_t seed : {7, 8, 9}) {
    HeapAllocator first(MiB, 17 * MiB);
    HeapAllocator second(MiB, 17 * MiB);
    // Unrelated heap traffic in between must not matter: nothing depends on addresses or time.
    std::vector<std::vector<char>> noise;
    for (int i = 0; i < 100; ++i) noise.emplace_back(static_cast<std::size_t>(i) * 97);
    EXPECT_EQ(replay(first, seed, 10000), replay(second, seed, 10000)) << "seed " << seed;
  }
}

TEST(HeapAllocator, CopyContinuesIdentically) {
  HeapAllocator original(MiB, 17 * MiB);
  replay(original, 11, 3000);
  HeapAllocator copy = original;
  EXPECT_EQ(replay(original, 12, 3000), replay(copy, 12, 3000));
}

}  // namespace
