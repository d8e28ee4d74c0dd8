// Several ranks (started by iris-run): the heap is mapped everywhere, every rank reaches every
// peer's copy, allocation stays consistent, and create/destroy leaks nothing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "iris/iris.hpp"
#include "support/open_fds.hpp"

namespace {

iris::ContextOptions options_with(iris::HeapTransport transport, std::size_t heap_bytes) {
  iris::ContextOptions options;
  options.transport = transport;
  options.heap_size = heap_bytes;
  return options;
}

// Every rank writes (its rank, index) into slot `rank` of every peer's buffer; each slot holds
// `count` values. Translation happens once per peer, then the stores are plain.
__global__ void write_everywhere(iris::device::Context ctx, std::uint64_t* slots,
                                 std::size_t count) {
  for (int peer = 0; peer < ctx.world_size(); ++peer) {
    std::uint64_t* mine_on_peer = ctx.translate(slots, peer) + ctx.rank() * count;
    for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += std::size_t{gridDim.x} * blockDim.x) {
      mine_on_peer[i] = (std::uint64_t(ctx.rank()) << 40) | (std::uint64_t(peer) << 32) | i;
    }
  }
}

void check_all_to_all(iris::Context& ctx) {
  constexpr std::size_t kCount = 100003;  // odd on purpose
  auto slots = ctx.full<std::uint64_t>(kCount * ctx.world_size(), ~std::uint64_t{0});
  write_everywhere<<<132, 256>>>(ctx.device(), slots.data(), kCount);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ctx.barrier();
  const auto values = slots.to_host();
  for (int from = 0; from < ctx.world_size(); ++from) {
    for (std::size_t i = 0; i < kCount; ++i) {
      const std::uint64_t expected =
          (std::uint64_t(from) << 40) | (std::uint64_t(ctx.rank()) << 32) | i;
      ASSERT_EQ(values[from * kCount + i], expected)
          << "rank " << ctx.rank() << ": slot of rank " << from << ", element " << i;
    }
  }
  ctx.barrier();  // no rank frees `slots` (collectively) before every rank has checked its copy
}

TEST(Heap, EveryRankReachesEveryPeerThroughVmm) {
  iris::Context ctx =
      iris::Context::from_env(options_with(iris::HeapTransport::kVmm, std::size_t{256} << 20));
  const iris::HeapInfo heap = ctx.heap();
  ASSERT_EQ(heap.transport, iris::HeapTransport::kVmm);
  EXPECT_EQ(heap.base, heap.window + ctx.rank() * heap.stride);
  const auto device = ctx.device();
  EXPECT_TRUE(device.is_flat());
  for (int r = 0; r < ctx.world_size(); ++r) {
    EXPECT_EQ(device.heap_base_of(r), heap.window + r * heap.stride);
    EXPECT_EQ(device.translate(heap.base + 12345, r), heap.window + r * heap.stride + 12345);
  }
  check_all_to_all(ctx);
}

TEST(Heap, EveryRankReachesEveryPeerThroughIpc) {
  iris::Context ctx =
      iris::Context::from_env(options_with(iris::HeapTransport::kIpc, std::size_t{256} << 20));
  ASSERT_EQ(ctx.heap().transport, iris::HeapTransport::kIpc);
  EXPECT_FALSE(ctx.device().is_flat());
  check_all_to_all(ctx);
}

TEST(Heap, HostSeesPeersThroughBufferOn) {
  iris::Context ctx =
      iris::Context::from_env(options_with(iris::HeapTransport::kAuto, std::size_t{64} << 20));
  auto buffer = ctx.full<int>(1024, ctx.rank() + 1);
  for (int r = 0; r < ctx.world_size(); ++r) {
    std::vector<int> peer(1024);
    ASSERT_EQ(cudaMemcpy(peer.data(), buffer.on(r), 1024 * sizeof(int), cudaMemcpyDefault),
              cudaSuccess);
    for (int v : peer) ASSERT_EQ(v, r + 1) << "reading rank " << r;
  }
  ctx.barrier();
}

TEST(Heap, DivergentAllocationIsNamedOnEveryRank) {
  iris::ContextOptions options = options_with(iris::HeapTransport::kAuto, std::size_t{64} << 20);
  options.debug_checks = true;
  iris::Context ctx = iris::Context::from_env(options);
  auto same = ctx.zeros<float>(1000);  // identical everywhere: passes
  const std::size_t count = ctx.rank() == 1 ? 2048 : 1024;
  try {
    auto differs = ctx.empty<float>(count);
    FAIL() << "rank " << ctx.rank() << ": a divergent allocation was not detected";
  } catch (const iris::Error& error) {
    EXPECT_EQ(error.code(), iris::Errc::kMismatch);
    const std::string text = error.what();
    EXPECT_NE(text.find("#2"), std::string::npos) << text;
    EXPECT_NE(text.find("heap_test.cu"), std::string::npos) << text;
  }
}

TEST(Heap, HundredCreateDestroyCyclesLeakNothing) {
  // `anchor` lives throughout and its barrier lines the ranks up, so that both measurements of
  // the GPU's free memory (shared by all ranks on it) see every rank in the same state.
  iris::Context anchor =
      iris::Context::from_env(options_with(iris::HeapTransport::kAuto, 64 << 20));
  {
    iris::Context warm = iris::Context::from_env(options_with(iris::HeapTransport::kVmm, 64 << 20));
  }
  anchor.barrier();
  std::size_t free_before = 0, free_after = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  const std::size_t fds_before = iris::test::open_fd_count();
  anchor.barrier();
  for (int cycle = 0; cycle < 100; ++cycle) {
    iris::Context ctx = iris::Context::from_env(options_with(iris::HeapTransport::kVmm, 64 << 20));
    auto buffer = ctx.full<int>(4096, cycle);
    ASSERT_EQ(buffer.to_host()[4095], cycle);
  }
  anchor.barrier();
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_EQ(iris::test::open_fd_count(), fds_before);
  const long long lost = static_cast<long long>(free_before) - static_cast<long long>(free_after);
  EXPECT_LE(lost, 8ll << 20) << "device memory lost over 100 cycles: " << lost << " bytes";
  anchor.barrier();
}

}  // namespace
