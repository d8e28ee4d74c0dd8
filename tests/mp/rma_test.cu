// Data movement between ranks: put, get, copy and load/store through registers, for every
// cooperation level, element sizes 1 to 12 bytes, 1-D ranges of odd lengths at misaligned
// offsets, and 2-D tiles with different row strides on the two sides. Destinations are poisoned
// before every run and every byte of them is checked afterwards, padding and guards included.
// Debug checks are on, so a valid call that a check rejects fails here too.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "iris/iris.hpp"
#include "mp/common.cuh"

namespace {

using iris_test::context;

enum class Op { kPut, kGet, kCopy, kRegisters };

const char* op_name(Op op) {
  constexpr const char* kNames[] = {"put", "get", "copy", "load/store"};
  return kNames[static_cast<int>(op)];
}

/// One region of the source and destination buffers: a rows x cols tile (rows == 1 for 1-D
/// cases) starting at element `region + *_offset`, rows `*_stride` elements apart.
struct Case {
  std::size_t rows, cols, dst_stride, src_stride, dst_offset, src_offset, region;
  bool tile;  // moved with the 2-D (tile_view) API, else the 1-D one
};

struct Triple {  // 12 bytes, 4-byte aligned: never a whole vector
  float x, y, z;
};

constexpr std::uint8_t kPoison = 0xA5;

std::uint8_t source_byte(int rank, std::size_t index) {
  return static_cast<std::uint8_t>(index * 167 + (index >> 8) * 13 + rank * 59 + 1);
}

/// Registers: each member moves 4 elements per step (16-byte vectors for 4-byte elements).
constexpr std::size_t kPerMember = 4;

template <Op kOp, class G, class T>
__global__ void move_kernel(const __grid_constant__ iris::device::Context ctx, T* dst, T* src,
                            const Case* cases, std::size_t case_count) {
  const std::size_t index = iris_test::group_index<G>();
  if (index >= case_count) return;
  const Case c = cases[index];
  const int rank = ctx.rank(), world = ctx.world_size();
  const int right = (rank + 1) % world, far_right = (rank + 2) % world;
  T* d = dst + c.region + c.dst_offset;
  T* s = src + c.region + c.src_offset;
  const auto group = iris_test::make_group<G>();
  if (c.tile) {
    const iris::device::tile_view<T> dt(d, c.rows, c.cols, c.dst_stride);
    const iris::device::tile_view<const T> st(s, c.rows, c.cols, c.src_stride);
    if constexpr (kOp == Op::kPut) iris::device::put(group, ctx, dt, st, right);
    if constexpr (kOp == Op::kGet) iris::device::get(group, ctx, dt, st, right);
    if constexpr (kOp == Op::kCopy) iris::device::copy(group, ctx, dt, st, far_right, right);
    return;
  }
  const std::size_t n = c.cols;
  if constexpr (kOp == Op::kPut) iris::device::put(group, ctx, d, s, n, right);
  if constexpr (kOp == Op::kGet) iris::device::get(group, ctx, d, s, n, right);
  if constexpr (kOp == Op::kCopy) iris::device::copy(group, ctx, d, s, n, far_right, right);
  if constexpr (kOp == Op::kRegisters) {
    for (std::size_t base = 0; base < n; base += group.num_threads() * kPerMember) {
      const auto values = iris::device::load<kPerMember>(group, ctx, s + base, n - base, right);
      iris::device::store(group, ctx, d + base, values, n - base, right);
    }
  }
}

/// The rank whose source lands in this rank's destination (see move_kernel's targets).
int source_rank(Op op, int rank, int world) {
  switch (op) {
    case Op::kPut:
      return iris_test::left_of(rank, world);
    case Op::kGet:
      return iris_test::right_of(rank, world);
    case Op::kCopy:
      return iris_test::left_of(rank, world);
    case Op::kRegisters:
      return rank;
  }
  return -1;
}

std::vector<Case> one_dimensional_cases(std::size_t& elements) {
  const std::size_t counts[] = {0, 1, 2, 3, 7, 31, 32, 33, 100, 257, 1000, 4099, 12345};
  const std::size_t offsets[][2] = {{0, 0}, {1, 1}, {1, 0}, {3, 5}, {0, 7}, {6, 2}};
  constexpr std::size_t kRegion = 12345 + 32;
  std::vector<Case> cases;
  for (std::size_t n : counts)
    for (const auto& o : offsets)
      cases.push_back({1, n, n, n, o[0], o[1], cases.size() * kRegion, false});
  elements = cases.size() * kRegion;
  return cases;
}

std::vector<Case> tile_cases(std::size_t& elements) {
  // rows, cols, dst stride, src stride, dst offset, src offset
  const std::size_t shapes[][6] = {
      {1, 1000, 1000, 1000, 1, 0},  // a single row
      {16, 64, 64, 64, 0, 0},       // packed on both sides: one range
      {37, 29, 41, 33, 1, 2},       // odd everything
      {5, 3, 7, 3, 0, 1},           // tiny rows
      {64, 130, 130, 131, 4, 4},    // rows wider than a warp's vectors
      {9, 200, 256, 200, 3, 0},     // padded destination
  };
  constexpr std::size_t kRegion = 64 * 131 + 64;
  std::vector<Case> cases;
  for (const auto& s : shapes)
    cases.push_back({s[0], s[1], s[2], s[3], s[4], s[5], cases.size() * kRegion, true});
  elements = cases.size() * kRegion;
  return cases;
}

/// What this rank's destination must hold afterwards, byte for byte.
template <class T>
std::vector<std::uint8_t> expected_destination(const std::vector<Case>& cases, std::size_t elements,
                                               int from) {
  std::vector<std::uint8_t> expected(elements * sizeof(T), kPoison);
  for (const Case& c : cases)
    for (std::size_t r = 0; r < c.rows; ++r)
      for (std::size_t b = 0; b < c.cols * sizeof(T); ++b) {
        const std::size_t src = (c.region + c.src_offset + r * c.src_stride) * sizeof(T) + b;
        const std::size_t dst = (c.region + c.dst_offset + r * c.dst_stride) * sizeof(T) + b;
        expected[dst] = source_byte(from, src);
      }
  return expected;
}

std::string describe(const std::vector<Case>& cases, std::size_t byte, std::size_t element_size) {
  const std::size_t element = byte / element_size;
  for (const Case& c : cases) {
    if (element >= c.region && (&c == &cases.back() || element < (&c + 1)->region)) {
      return "case " + std::to_string(&c - cases.data()) + " (" + std::to_string(c.rows) + "x" +
             std::to_string(c.cols) + ", strides " + std::to_string(c.dst_stride) + "/" +
             std::to_string(c.src_stride) + ", offsets " + std::to_string(c.dst_offset) + "/" +
             std::to_string(c.src_offset) + "), element " + std::to_string(element - c.region);
    }
  }
  return "element " + std::to_string(element);
}

template <Op kOp, class G, class T>
void run_and_check(const std::vector<Case>& cases, std::size_t elements) {
  iris::Context& ctx = context(/*debug_checks=*/true);
  SCOPED_TRACE(std::string(op_name(kOp)) + " by " + iris_test::group_name<G>() + " of " +
               std::to_string(sizeof(T)) + "-byte elements");
  auto src = ctx.empty<std::uint8_t>(elements * sizeof(T));
  auto dst = ctx.empty<std::uint8_t>(elements * sizeof(T));
  auto device_cases = ctx.empty<std::uint8_t>(cases.size() * sizeof(Case));
  std::vector<std::uint8_t> bytes(src.size());
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = source_byte(ctx.rank(), i);
  src.copy_from_host(bytes);
  std::memcpy(bytes.data(), cases.data(), cases.size() * sizeof(Case));
  device_cases.copy_from_host({bytes.begin(), bytes.begin() + cases.size() * sizeof(Case)});
  ASSERT_EQ(cudaMemset(dst.data(), kPoison, dst.bytes()), cudaSuccess);
  ctx.barrier();  // every destination is poisoned before anyone writes

  move_kernel<kOp, G, T><<<iris_test::blocks_for<G>(cases.size()), iris_test::kThreadsPerBlock>>>(
      ctx.device(), reinterpret_cast<T*>(dst.data()), reinterpret_cast<T*>(src.data()),
      reinterpret_cast<const Case*>(device_cases.data()), cases.size());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ctx.barrier();  // every rank's writes into this rank are done

  const auto expected =
      expected_destination<T>(cases, elements, source_rank(kOp, ctx.rank(), ctx.world_size()));
  const auto actual = dst.to_host();
  for (std::size_t i = 0; i < actual.size(); ++i) {
    ASSERT_EQ(actual[i], expected[i])
        << "rank " << ctx.rank() << ", byte " << i << " of " << describe(cases, i, sizeof(T));
  }
  ctx.barrier();  // nobody frees (collectively) before everyone has checked
}

template <Op kOp, class T>
void run_all_groups(const std::vector<Case>& cases, std::size_t elements) {
  iris_test::for_each_group([&]<class G>(G) { run_and_check<kOp, G, T>(cases, elements); });
}

template <class T>
void run_all_ops(const std::vector<Case>& cases, std::size_t elements, bool registers) {
  run_all_groups<Op::kPut, T>(cases, elements);
  run_all_groups<Op::kGet, T>(cases, elements);
  run_all_groups<Op::kCopy, T>(cases, elements);
  if (registers) run_all_groups<Op::kRegisters, T>(cases, elements);
}

TEST(Rma, OneDimensionalRangesOfOddLengthsAndOffsets) {
  std::size_t elements = 0;
  const auto cases = one_dimensional_cases(elements);
  run_all_ops<std::uint8_t>(cases, elements, true);
  run_all_ops<std::uint16_t>(cases, elements, true);
  run_all_ops<float>(cases, elements, true);
  run_all_ops<double>(cases, elements, true);
  run_all_ops<Triple>(cases, elements, true);
}

TEST(Rma, TwoDimensionalTilesWithRowStrides) {
  std::size_t elements = 0;
  const auto cases = tile_cases(elements);
  run_all_ops<std::uint8_t>(cases, elements, false);
  run_all_ops<float>(cases, elements, false);
  run_all_ops<double>(cases, elements, false);
  run_all_ops<Triple>(cases, elements, false);
}

// Single values: every rank stores its rank into slot `rank` of every peer's array and loads
// the peers' slots of its own rank back; then a tile translated once takes plain stores.
__global__ void single_values(const __grid_constant__ iris::device::Context ctx, int* slots,
                              int* loaded, float* tile_buffer, std::size_t cols) {
  const int rank = ctx.rank(), world = ctx.world_size();
  for (int peer = threadIdx.x; peer < world; peer += blockDim.x)
    iris::device::store(ctx, slots + rank, 1000 * rank + peer, peer);
  iris::device::barrier(iris::block{}, ctx);
  for (int peer = threadIdx.x; peer < world; peer += blockDim.x)
    loaded[peer] = iris::device::load(ctx, slots + peer, peer);
  // (ROWS,COLS) tile, stored to the right neighbour through one translation
  const iris::device::tile_view<float> tile(tile_buffer, 8, cols, cols);
  const auto remote = iris::device::translate(ctx, tile, (rank + 1) % world);  // checked
  for (std::size_t i = threadIdx.x; i < 8 * cols; i += blockDim.x)
    remote(i / cols, i % cols) = float(rank * 10000 + i);
}

TEST(Rma, SingleValuesAndTranslatedTiles) {
  iris::Context& ctx = context(true);
  const int world = ctx.world_size();
  auto slots = ctx.full<int>(world, -1);
  auto loaded = ctx.full<int>(world, -1);
  constexpr std::size_t kCols = 33;
  auto tile = ctx.full<float>(8 * kCols, -1.0f);
  single_values<<<1, 64>>>(ctx.device(), slots.data(), loaded.data(), tile.data(), kCols);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ctx.barrier();
  const auto slot_values = slots.to_host();
  const auto loaded_values = loaded.to_host();
  for (int peer = 0; peer < world; ++peer) {
    EXPECT_EQ(slot_values[peer], 1000 * peer + ctx.rank()) << "slot of rank " << peer;
    // Slot `peer` of peer's array holds what `peer` stored there: 1000 * peer + peer.
    EXPECT_EQ(loaded_values[peer], 1000 * peer + peer) << "loaded from rank " << peer;
  }
  const auto tile_values = tile.to_host();
  const int left = iris_test::left_of(ctx.rank(), world);
  for (std::size_t i = 0; i < tile_values.size(); ++i)
    ASSERT_EQ(tile_values[i], float(left * 10000 + i)) << "tile element " << i;
  ctx.barrier();
}

// The whole grid as one group: 8 blocks share one long range, odd length, at an odd offset.
template <Op kOp>
__global__ void grid_move(const __grid_constant__ iris::device::Context ctx, int* dst,
                          const int* src, std::size_t n) {
  const int rank = ctx.rank(), world = ctx.world_size();
  const int right = (rank + 1) % world, far_right = (rank + 2) % world;
  if constexpr (kOp == Op::kPut) iris::device::put(iris::grid{}, ctx, dst + 1, src + 1, n, right);
  if constexpr (kOp == Op::kGet) iris::device::get(iris::grid{}, ctx, dst + 1, src + 1, n, right);
  if constexpr (kOp == Op::kCopy)
    iris::device::copy<2>(iris::grid{}, ctx, dst + 1, src + 1, n, far_right, right);
}

template <Op kOp>
void run_grid_move() {
  iris::Context& ctx = context(true);
  SCOPED_TRACE(std::string(op_name(kOp)) + " by the grid");
  constexpr std::size_t kCount = (std::size_t{1} << 20) + 7;
  std::vector<int> values(kCount + 2);
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = ctx.rank() * 10000000 + static_cast<int>(i);
  auto src = ctx.empty<int>(kCount + 2);
  src.copy_from_host(values);
  auto dst = ctx.full<int>(kCount + 2, -1);
  grid_move<kOp><<<8, 256>>>(ctx.device(), dst.data(), src.data(), kCount);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ctx.barrier();
  const int from = source_rank(kOp, ctx.rank(), ctx.world_size());
  const auto got = dst.to_host();
  EXPECT_EQ(got.front(), -1);
  EXPECT_EQ(got.back(), -1);
  for (std::size_t i = 1; i <= kCount; ++i)
    ASSERT_EQ(got[i], from * 10000000 + static_cast<int>(i))
        << "rank " << ctx.rank() << ", element " << i;
  ctx.barrier();
}

TEST(Rma, TheWholeGridMovesOneRange) {
  run_grid_move<Op::kPut>();
  run_grid_move<Op::kGet>();
  run_grid_move<Op::kCopy>();
}

}  // namespace
