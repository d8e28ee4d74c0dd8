// One process, one rank: the host Context, typed allocations and their fills, and the errors a
// user meets first.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>

#include "iris/iris.hpp"

namespace {

iris::ContextOptions small_heap() {
  iris::ContextOptions options;
  options.heap_size = std::size_t{64} << 20;
  return options;
}

iris::Context& shared_context() {
  static iris::Context ctx = iris::Context::from_env(small_heap());
  return ctx;
}

TEST(Context, SingleRankWithoutLauncher) {
  iris::Context& ctx = shared_context();
  EXPECT_EQ(ctx.world_size(), 1);
  EXPECT_EQ(ctx.rank(), 0);
  EXPECT_EQ(ctx.local_rank(), 0);
  EXPECT_EQ(ctx.local_world_size(), 1);
  const iris::HeapInfo heap = ctx.heap();
  EXPECT_GE(heap.size, std::size_t{64} << 20);
  EXPECT_NE(heap.transport, iris::HeapTransport::kAuto);
  EXPECT_TRUE(ctx.contains(heap.base));
  EXPECT_TRUE(ctx.contains(heap.base + heap.size - 1));
  EXPECT_FALSE(ctx.contains(heap.base + heap.size));
  const auto device = ctx.device();
  EXPECT_EQ(device.heap_base(), heap.base);
  EXPECT_EQ(device.translate(heap.base + 4096, 0), heap.base + 4096);
}

TEST(Context, FullZerosOnesAndTwoDimensionalShapes) {
  iris::Context& ctx = shared_context();
  {
    auto zeros = ctx.zeros<float>(1000);
    for (float v : zeros.to_host()) ASSERT_EQ(v, 0.0f);
    auto ones = ctx.ones<std::int64_t>(777);
    for (auto v : ones.to_host()) ASSERT_EQ(v, 1);
    auto sevens = ctx.full<double>(5, 7.5);
    for (double v : sevens.to_host()) ASSERT_EQ(v, 7.5);
  }
  // The padding of a 2-D buffer is left alone: poison the memory it will land on first. The
  // allocator is deterministic, so the same request after a free lands at the same offset.
  const iris::Shape shape(37, 50, 64);
  std::size_t offset = 0;
  {
    auto poison = ctx.empty<std::uint32_t>(shape);
    offset = poison.offset();
    ASSERT_EQ(cudaMemset(poison.data(), 0xAB, poison.bytes()), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  auto tile = ctx.full<std::uint32_t>(shape, 5u);
  ASSERT_EQ(tile.offset(), offset);
  EXPECT_EQ(tile.rows(), 37u);
  EXPECT_EQ(tile.cols(), 50u);
  EXPECT_EQ(tile.row_stride(), 64u);
  EXPECT_EQ(tile.size(), 37u * 50u);
  std::vector<std::uint32_t> raw(shape.span());
  ASSERT_EQ(cudaMemcpy(raw.data(), tile.data(), tile.bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
  for (std::size_t r = 0; r < shape.rows; ++r) {
    for (std::size_t c = 0; c < shape.row_stride; ++c) {
      ASSERT_EQ(raw[r * shape.row_stride + c], c < shape.cols ? 5u : 0xABABABABu)
          << "row " << r << " col " << c;
    }
  }
}

TEST(Context, LikeAllocationsTakeTheShapeAndFillOfTheirKind) {
  iris::Context& ctx = shared_context();
  const iris::Shape shape(5, 7, 9);
  auto model = ctx.full<std::int32_t>(shape, 3);
  auto empty = ctx.empty_like(model);
  auto zeros = ctx.zeros_like(model);
  auto ones = ctx.ones_like(model);
  auto full = ctx.full_like(model, std::int32_t{-4});
  for (const auto* b : {&empty, &zeros, &ones, &full}) {
    EXPECT_EQ(b->shape(), model.shape());
    EXPECT_NE(b->data(), model.data());
    EXPECT_NE(b->offset(), model.offset());
  }
  EXPECT_EQ(zeros.to_host(), std::vector<std::int32_t>(shape.rows * shape.cols, 0));
  EXPECT_EQ(ones.to_host(), std::vector<std::int32_t>(shape.rows * shape.cols, 1));
  EXPECT_EQ(full.to_host(), std::vector<std::int32_t>(shape.rows * shape.cols, -4));
  // The model is untouched by its likes.
  EXPECT_EQ(model.to_host(), std::vector<std::int32_t>(shape.rows * shape.cols, 3));
  auto halves = ctx.ones_like(ctx.zeros<__half>(3));
  for (__half v : halves.to_host()) EXPECT_EQ(__half2float(v), 1.0f);
}

TEST(Context, BarrierObjectsDescribeTheirTeamAndRefuseBadOnes) {
  iris::Context& ctx = shared_context();
  const iris::Barriers bars = ctx.make_barriers(3);
  EXPECT_EQ(bars.count(), 3);
  EXPECT_EQ(bars.team(), iris::team::world(1));
  const iris::device::Barriers handle = bars.device();
  EXPECT_EQ(handle.member(), 0);
  EXPECT_EQ(handle.channels(), 3);
  EXPECT_TRUE(ctx.contains(handle.slots(2)));
  // A channel is its epoch's line and whole lines of arrival slots: channels share no line.
  EXPECT_EQ(
      reinterpret_cast<std::byte*>(handle.slots(1)) - reinterpret_cast<std::byte*>(handle.slots(0)),
      256);
  EXPECT_THROW(ctx.make_barriers(0), iris::Error);
  EXPECT_THROW(ctx.make_barriers({.start = 0, .size = 2, .stride = 1}, 1), iris::Error);
  EXPECT_THROW(ctx.make_barriers({.start = 0, .size = 1, .stride = 0}, 1), iris::Error);
}

TEST(Context, ArangeCountsInRowMajorOrder) {
  iris::Context& ctx = shared_context();
  auto ints = ctx.arange<std::int32_t>(iris::Shape(3, 5, 8), 10, 3);
  const auto values = ints.to_host();
  for (std::size_t i = 0; i < values.size(); ++i)
    ASSERT_EQ(values[i], 10 + 3 * static_cast<int>(i));
  auto halves = ctx.arange<__half>(100, __float2half(0.0f), __float2half(0.5f));
  const auto h = halves.to_host();
  for (std::size_t i = 0; i < h.size(); ++i) ASSERT_EQ(__half2float(h[i]), 0.5f * i);
}

TEST(Context, UniformAndNormalAreSeededAndReproducible) {
  iris::Context& ctx = shared_context();
  constexpr std::size_t kCount = 1 << 16;
  auto a = ctx.uniform<float>(kCount, -2.0f, 3.0f, 42);
  auto b = ctx.uniform<float>(kCount, -2.0f, 3.0f, 42);
  auto c = ctx.uniform<float>(kCount, -2.0f, 3.0f, 43);
  const auto va = a.to_host(), vb = b.to_host(), vc = c.to_host();
  EXPECT_EQ(va, vb);
  EXPECT_NE(va, vc);
  double sum = 0;
  for (float v : va) {
    ASSERT_GE(v, -2.0f);
    ASSERT_LT(v, 3.0f);
    sum += v;
  }
  EXPECT_NEAR(sum / kCount, 0.5, 0.05);

  auto dice = ctx.uniform<std::int32_t>(kCount, 1, 7, 9);
  std::vector<int> seen(8, 0);
  for (int v : dice.to_host()) {
    ASSERT_GE(v, 1);
    ASSERT_LT(v, 7);
    ++seen[v];
  }
  for (int face = 1; face <= 6; ++face) EXPECT_GT(seen[face], kCount / 6 * 0.9) << face;

  auto n = ctx.normal<double>(kCount, 1.0, 2.0, 7);
  const auto vn = n.to_host();
  const double mean = std::accumulate(vn.begin(), vn.end(), 0.0) / kCount;
  double variance = 0;
  for (double v : vn) {
    ASSERT_TRUE(std::isfinite(v));
    variance += (v - mean) * (v - mean);
  }
  variance /= kCount;
  EXPECT_NEAR(mean, 1.0, 0.05);
  EXPECT_NEAR(std::sqrt(variance), 2.0, 0.05);

  auto bf = ctx.normal<__nv_bfloat16>(1000, __float2bfloat16(0.0f), __float2bfloat16(1.0f), 1);
  for (auto v : bf.to_host()) ASSERT_TRUE(std::isfinite(__bfloat162float(v)));
}

TEST(Context, CopyFromHostRoundTripsAndChecksSize) {
  iris::Context& ctx = shared_context();
  auto buffer = ctx.empty<std::uint16_t>(iris::Shape(4, 3, 5));
  std::vector<std::uint16_t> values(12);
  std::iota(values.begin(), values.end(), 100);
  buffer.copy_from_host(values);
  EXPECT_EQ(buffer.to_host(), values);
  values.pop_back();
  try {
    buffer.copy_from_host(values);
    FAIL() << "a short vector was accepted";
  } catch (const iris::Error& error) {
    EXPECT_EQ(error.code(), iris::Errc::kInvalidArgument);
    EXPECT_NE(std::string(error.what()).find("11 values"), std::string::npos) << error.what();
  }
}

TEST(Context, FreedMemoryIsReusedAndAccounted) {
  iris::Context& ctx = shared_context();
  const std::size_t before = ctx.heap().in_use;
  std::size_t first_offset = 0;
  {
    auto a = ctx.empty<char>(std::size_t{1} << 20);
    first_offset = a.offset();
    EXPECT_EQ(ctx.heap().in_use, before + (std::size_t{1} << 20));
  }
  EXPECT_EQ(ctx.heap().in_use, before);
  auto again = ctx.empty<char>(std::size_t{1} << 20);
  EXPECT_EQ(again.offset(), first_offset);
  void* raw = ctx.allocate_bytes(4096, 4096);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(raw) % 4096, 0u);
  ctx.free_bytes(raw);
}

TEST(Context, ErrorsNameTheProblem) {
  iris::Context& ctx = shared_context();
  try {
    (void)ctx.empty<float>(std::size_t{1} << 30);
    FAIL() << "a 4 GiB request fit in a 64 MiB heap";
  } catch (const iris::Error& error) {
    EXPECT_EQ(error.code(), iris::Errc::kOutOfMemory);
    EXPECT_NE(std::string(error.what()).find("IRIS_HEAP_SIZE"), std::string::npos) << error.what();
  }
  int local = 0;
  try {
    ctx.free_bytes(&local);
    FAIL() << "freeing a host pointer was accepted";
  } catch (const iris::Error& error) {
    EXPECT_EQ(error.code(), iris::Errc::kInvalidArgument);
  }
  EXPECT_THROW((void)ctx.allocate_bytes(64, 3), iris::Error);
  EXPECT_THROW((void)ctx.allocate_bytes(64, std::size_t{1} << 40), iris::Error);
  EXPECT_THROW((void)ctx.empty<float>(iris::Shape(4, 8, 2)), iris::Error);  // stride < cols
}

TEST(Context, BadOptionsAreRefused) {
  iris::ContextOptions options;
  options.heap_size = 4096;  // smaller than what Iris reserves
  EXPECT_THROW(iris::Context(iris::make_single_rank_bootstrap(), options), iris::Error);
  options = {};
  options.cuda_device = 1000;
  try {
    iris::Context ctx(iris::make_single_rank_bootstrap(), options);
    FAIL() << "device 1000 was accepted";
  } catch (const iris::Error& error) {
    EXPECT_EQ(error.code(), iris::Errc::kInvalidArgument);
    EXPECT_NE(std::string(error.what()).find("1000"), std::string::npos) << error.what();
  }
  EXPECT_THROW(iris::Context(nullptr), iris::Error);
}

TEST(Context, BuffersMayOutliveTheirContext) {
  iris::Buffer<int> survivor;
  {
    iris::Context ctx(iris::make_single_rank_bootstrap(), small_heap());
    survivor = ctx.full<int>(16, 3);
  }
  for (int v : survivor.to_host()) EXPECT_EQ(v, 3);
  survivor.reset();
  EXPECT_FALSE(survivor);
}

TEST(Context, IpcTransportWorksAlone) {
  iris::ContextOptions options = small_heap();
  options.transport = iris::HeapTransport::kIpc;
  iris::Context ctx(iris::make_single_rank_bootstrap(), options);
  EXPECT_EQ(ctx.heap().transport, iris::HeapTransport::kIpc);
  EXPECT_FALSE(ctx.device().is_flat());
  auto buffer = ctx.arange<int>(1000);
  EXPECT_EQ(buffer.to_host()[999], 999);
}

}  // namespace
