// iris::device::Context's pointer arithmetic, run on the host: translation between ranks in the
// flat window (base + rank * stride) and through a table of peer bases (the cudaIpc fallback).
// Heaps here are host buffers laid out as the runtime lays out the real ones; nothing is
// dereferenced through a translated pointer except where a buffer backs it.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "iris/device/context.hpp"

namespace {

using iris::device::Context;

Context flat_context(int rank, int world_size, std::byte* window, std::size_t heap_size,
                     std::ptrdiff_t stride) {
  return Context(rank, world_size, window + rank * stride, heap_size, stride, nullptr, nullptr, 0,
                 false);
}

Context table_context(int rank, int world_size, std::byte* const* peer_bases,
                      std::size_t heap_size) {
  return Context(rank, world_size, peer_bases[rank], heap_size, 0, peer_bases, nullptr, 0, false);
}

// Offsets worth checking in a heap of `heap_size` bytes: both ends and a few inside.
std::vector<std::size_t> probe_offsets(std::size_t heap_size) {
  return {0, 1, 8, 255, heap_size / 2, heap_size - 8, heap_size - 1};
}

// Translated pointers keep the pointee's qualifiers.
static_assert(
    std::is_same_v<decltype(std::declval<Context>().translate(std::declval<float*>(), 0)), float*>);
static_assert(
    std::is_same_v<decltype(std::declval<Context>().translate(std::declval<const float*>(), 0)),
                   const float*>);
static_assert(
    std::is_same_v<decltype(std::declval<Context>().translate(std::declval<const void*>(), 0)),
                   const void*>);
static_assert(std::is_same_v<decltype(std::declval<Context>().at<const int>(0, 0)), const int*>);

TEST(DeviceContext, DefaultIsASingleRankWithoutAHeap) {
  const Context context;
  EXPECT_EQ(context.rank(), 0);
  EXPECT_EQ(context.world_size(), 1);
  EXPECT_EQ(context.heap_base(), nullptr);
  EXPECT_EQ(context.heap_size(), 0u);
  EXPECT_TRUE(context.is_flat());
  EXPECT_FALSE(context.debug_checks());
  int local = 0;
  EXPECT_FALSE(context.contains(&local));
  EXPECT_FALSE(context.contains(nullptr));
}

TEST(DeviceContext, KeepsWhatItWasMadeWith) {
  std::vector<std::byte> window(4 * 1024);
  auto* mailbox = reinterpret_cast<iris::device::ErrorMailbox*>(window.data());
  const Context context(2, 4, window.data() + 2048, 512, 1024, nullptr, mailbox, 123456789, true);
  EXPECT_EQ(context.rank(), 2);
  EXPECT_EQ(context.world_size(), 4);
  EXPECT_EQ(context.heap_base(), window.data() + 2048);
  EXPECT_EQ(context.heap_size(), 512u);
  EXPECT_EQ(context.stride(), 1024);
  EXPECT_TRUE(context.is_flat());
  EXPECT_EQ(context.mailbox(), mailbox);
  EXPECT_EQ(context.wait_timeout_ns(), 123456789u);
  EXPECT_TRUE(context.debug_checks());
}

TEST(DeviceContext, ContainsExactlyTheHeap) {
  constexpr std::size_t kHeapSize = 1024;
  constexpr std::ptrdiff_t kStride = 4096;
  std::vector<std::byte> window(3 * kStride);
  const Context context = flat_context(1, 3, window.data(), kHeapSize, kStride);
  std::byte* base = context.heap_base();
  EXPECT_TRUE(context.contains(base));
  EXPECT_TRUE(context.contains(base + kHeapSize - 1));
  EXPECT_FALSE(context.contains(base + kHeapSize));
  EXPECT_FALSE(context.contains(base - 1));
  EXPECT_FALSE(context.contains(window.data()));                // rank 0's heap
  EXPECT_FALSE(context.contains(window.data() + 2 * kStride));  // rank 2's heap
  EXPECT_FALSE(context.contains(nullptr));
  const std::byte* read_only = base + 10;
  EXPECT_TRUE(context.contains(read_only));
}

// Every rank of every world size, heaps packed (stride == size) and with gaps between them.
TEST(DeviceContext, FlatTranslationIsStrideArithmetic) {
  for (const int world_size : {1, 2, 3, 4, 8}) {
    for (const std::size_t heap_size : {std::size_t{256}, std::size_t{4096}}) {
      for (const std::ptrdiff_t stride :
           {static_cast<std::ptrdiff_t>(heap_size), static_cast<std::ptrdiff_t>(3 * heap_size)}) {
        SCOPED_TRACE(testing::Message()
                     << "world " << world_size << ", heap " << heap_size << ", stride " << stride);
        std::vector<std::byte> window(world_size * stride);
        for (int rank = 0; rank < world_size; ++rank) {
          const Context context = flat_context(rank, world_size, window.data(), heap_size, stride);
          for (int to = 0; to < world_size; ++to) {
            std::byte* peer_base = window.data() + to * stride;
            EXPECT_EQ(context.heap_base_of(to), peer_base);
            for (const std::size_t offset : probe_offsets(heap_size)) {
              std::byte* mine = context.heap_base() + offset;
              EXPECT_EQ(context.offset_of(mine), offset);
              EXPECT_EQ(context.translate(mine, to), peer_base + offset);
              EXPECT_EQ(context.at<std::byte>(offset, to), peer_base + offset);
            }
          }
        }
      }
    }
  }
}

TEST(DeviceContext, TypedPointersTranslateByBytesNotElements) {
  constexpr std::size_t kHeapSize = 1024;
  constexpr std::ptrdiff_t kStride = 2048;
  std::vector<std::byte> window(4 * kStride);
  const Context from = flat_context(1, 4, window.data(), kHeapSize, kStride);
  const Context to = flat_context(3, 4, window.data(), kHeapSize, kStride);

  auto* values = reinterpret_cast<double*>(from.heap_base() + 64);
  double* peer_values = from.translate(values, 3);
  EXPECT_EQ(reinterpret_cast<std::byte*>(peer_values), to.heap_base() + 64);
  EXPECT_EQ(from.translate(values + 5, 3), peer_values + 5);

  // A store through the translated pointer lands in the peer's heap.
  *from.translate(values + 2, 3) = 2.5;
  EXPECT_EQ(*to.at<const double>(64 + 2 * sizeof(double), 3), 2.5);

  const double* read_only = values;
  EXPECT_EQ(from.translate(read_only, 3), peer_values);
  const void* untyped = values;
  EXPECT_EQ(from.translate(untyped, 0), static_cast<const void*>(window.data() + 64));
}

TEST(DeviceContext, FlatRoundTripsReturnTheSamePointer) {
  constexpr int kWorldSize = 8;
  constexpr std::size_t kHeapSize = 512;
  constexpr std::ptrdiff_t kStride = 1024;
  std::vector<std::byte> window(kWorldSize * kStride);
  std::vector<Context> contexts;
  for (int rank = 0; rank < kWorldSize; ++rank)
    contexts.push_back(flat_context(rank, kWorldSize, window.data(), kHeapSize, kStride));

  for (int a = 0; a < kWorldSize; ++a) {
    for (const std::size_t offset : probe_offsets(kHeapSize)) {
      const std::byte* p = contexts[a].heap_base() + offset;
      EXPECT_EQ(contexts[a].translate(p, a), p);
      for (int b = 0; b < kWorldSize; ++b) {
        const std::byte* on_b = contexts[a].translate(p, b);
        EXPECT_TRUE(contexts[b].contains(on_b));
        EXPECT_EQ(contexts[b].offset_of(on_b), offset);
        EXPECT_EQ(contexts[b].translate(on_b, a), p);
        for (int c = 0; c < kWorldSize; ++c)
          EXPECT_EQ(contexts[b].translate(on_b, c), contexts[a].translate(p, c));
      }
    }
  }
}

// Real heaps are large (stride of many GiB times eight ranks): the multiply must be done in
// 64 bits. The addresses are made up and never dereferenced.
TEST(DeviceContext, FlatTranslationHandlesLargeStrides) {
  constexpr std::ptrdiff_t kStride = std::ptrdiff_t{80} << 30;  // 80 GiB
  constexpr std::size_t kHeapSize = std::size_t{64} << 30;
  const std::uintptr_t window = std::uintptr_t{1} << 44;
  auto* base_of_rank_7 = reinterpret_cast<std::byte*>(window + 7 * kStride);
  const Context context(7, 8, base_of_rank_7, kHeapSize, kStride, nullptr, nullptr, 0, false);
  std::byte* p = base_of_rank_7 + 12345;
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(context.translate(p, 0)), window + 12345);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(context.heap_base_of(1)), window + kStride);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(context.at<int>(kHeapSize - 4, 2)),
            window + 2 * kStride + kHeapSize - 4);
  EXPECT_TRUE(context.contains(base_of_rank_7 + kHeapSize - 1));
  EXPECT_FALSE(context.contains(base_of_rank_7 + kHeapSize));
}

// Table mode: heaps at unrelated addresses, in no particular order, found through peer_bases.
class TableContext : public testing::Test {
 protected:
  static constexpr int kWorldSize = 5;
  static constexpr std::size_t kHeapSize = 768;

  void SetUp() override {
    // Rank r's heap sits at a position that is not a multiple of anything and decreases with r,
    // so no stride could describe the layout.
    static constexpr std::size_t kPositions[kWorldSize] = {9000, 6100, 4432, 2048, 100};
    storage_.resize(10000);
    for (int rank = 0; rank < kWorldSize; ++rank)
      peer_bases_.push_back(storage_.data() + kPositions[rank]);
    for (int rank = 0; rank < kWorldSize; ++rank)
      contexts_.push_back(table_context(rank, kWorldSize, peer_bases_.data(), kHeapSize));
  }

  std::vector<std::byte> storage_;
  std::vector<std::byte*> peer_bases_;
  std::vector<Context> contexts_;
};

TEST_F(TableContext, IsNotFlat) {
  for (const Context& context : contexts_) {
    EXPECT_FALSE(context.is_flat());
    EXPECT_EQ(context.stride(), 0);
  }
}

TEST_F(TableContext, TranslatesThroughThePeerBases) {
  for (int rank = 0; rank < kWorldSize; ++rank) {
    const Context& context = contexts_[rank];
    EXPECT_EQ(context.heap_base(), peer_bases_[rank]);
    for (int to = 0; to < kWorldSize; ++to) {
      EXPECT_EQ(context.heap_base_of(to), peer_bases_[to]);
      for (const std::size_t offset : probe_offsets(kHeapSize)) {
        std::byte* mine = context.heap_base() + offset;
        EXPECT_EQ(context.offset_of(mine), offset);
        EXPECT_EQ(context.translate(mine, to), peer_bases_[to] + offset);
        const std::byte* read_only = mine;
        EXPECT_EQ(context.translate(read_only, to), peer_bases_[to] + offset);
        EXPECT_EQ(context.at<std::byte>(offset, to), peer_bases_[to] + offset);
      }
    }
  }
}

TEST_F(TableContext, RoundTripsReturnTheSamePointer) {
  for (int a = 0; a < kWorldSize; ++a) {
    for (const std::size_t offset : probe_offsets(kHeapSize)) {
      auto* p = reinterpret_cast<const char*>(contexts_[a].heap_base() + offset);
      for (int b = 0; b < kWorldSize; ++b) {
        const char* on_b = contexts_[a].translate(p, b);
        EXPECT_TRUE(contexts_[b].contains(on_b));
        EXPECT_EQ(contexts_[b].translate(on_b, a), p);
      }
    }
  }
}

TEST_F(TableContext, ContainsOnlyItsOwnHeap) {
  const Context& context = contexts_[2];
  EXPECT_TRUE(context.contains(peer_bases_[2]));
  EXPECT_TRUE(context.contains(peer_bases_[2] + kHeapSize - 1));
  EXPECT_FALSE(context.contains(peer_bases_[2] + kHeapSize));
  EXPECT_FALSE(context.contains(peer_bases_[2] - 1));
  for (const int other : {0, 1, 3, 4}) EXPECT_FALSE(context.contains(peer_bases_[other]));
}

TEST_F(TableContext, WritesReachThePeersHeap) {
  auto* counter = reinterpret_cast<int*>(contexts_[4].heap_base() + 128);
  for (int to = 0; to < kWorldSize; ++to) *contexts_[4].translate(counter, to) = 10 + to;
  for (int rank = 0; rank < kWorldSize; ++rank)
    EXPECT_EQ(*contexts_[rank].at<const int>(128, rank), 10 + rank);
}

}  // namespace
