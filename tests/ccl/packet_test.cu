// iris::device packets (iris/device/packet.hpp): every rank sends every other rank a message of
// odd length in packets, many rounds in one kernel with the slots double-buffered by round
// parity, and checks every byte it receives; the thread-level forms; and a poll that sees
// nothing before the packet is written.
#include <gtest/gtest.h>

#include <cstdint>

#include "iris/iris.hpp"
#include "mp/common.cuh"

namespace {

using iris::device::packet;
using iris_test::context;

constexpr int kRounds = 300;

__device__ std::uint8_t byte_of(int rank, int round, std::size_t j) {
  return static_cast<std::uint8_t>((j * 31 + rank * 7 + round * 13) & 0xff);
}

/// slots: [parity][sender][capacity packets]; scratch: local staging of 2 * bytes.
__global__ void exchange_rounds(const __grid_constant__ iris::device::Context ctx, packet* slots,
                                std::size_t capacity, std::byte* scratch, std::size_t bytes,
                                unsigned* errors) {
  const int me = ctx.rank(), world = ctx.world_size();
  std::byte* out = scratch;
  std::byte* in = scratch + bytes;
  for (int round = 0; round < kRounds; ++round) {
    const auto flag = static_cast<std::uint32_t>(round + 1);
    const int parity = round & 1;
    // A packet carries 8 bytes that different threads wrote: sync before sending. (The sends
    // of the previous round are over: the receives after them synced the block.)
    for (std::size_t j = threadIdx.x; j < bytes; j += blockDim.x)
      out[j] = std::byte{byte_of(me, round, j)};
    __syncthreads();
    for (int peer = 0; peer < world; ++peer) {
      if (peer == me) continue;
      iris::device::packet_put(iris::block{}, ctx, slots + (parity * world + me) * capacity, out,
                               bytes, flag, peer);
    }
    for (int from = 0; from < world; ++from) {
      if (from == me) continue;
      iris::device::packet_get(iris::block{}, ctx, in, slots + (parity * world + from) * capacity,
                               bytes, flag, from);
      __syncthreads();
      for (std::size_t j = threadIdx.x; j < bytes; j += blockDim.x)
        if (in[j] != std::byte{byte_of(from, round, j)}) atomicAdd(errors, 1u);
      __syncthreads();
    }
  }
}

TEST(Packet, ManyRoundsAllPairsOddSizes) {
  iris::Context& ctx = context();
  const int world = ctx.world_size();
  for (std::size_t bytes : {std::size_t{1}, std::size_t{13}, std::size_t{4101}}) {
    const std::size_t capacity = iris::device::packets_for(bytes);
    auto* slots = static_cast<packet*>(ctx.allocate_bytes(2 * world * capacity * sizeof(packet)));
    ASSERT_EQ(cudaMemset(slots, 0, 2 * world * capacity * sizeof(packet)), cudaSuccess);
    auto* scratch = static_cast<std::byte*>(ctx.allocate_bytes(2 * bytes));
    auto errors = ctx.zeros<unsigned>(1);
    ctx.barrier();
    exchange_rounds<<<1, 256>>>(ctx.device(), slots, capacity, scratch, bytes, errors.data());
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ctx.barrier();
    EXPECT_EQ(errors.to_host()[0], 0u) << "bytes " << bytes << " rank " << ctx.rank();
    ctx.barrier();
    ctx.free_bytes(scratch);
    ctx.free_bytes(slots);
  }
}

__global__ void thread_forms(const __grid_constant__ iris::device::Context ctx, packet* slot,
                             std::uint64_t* result) {
  const int right = (ctx.rank() + 1) % ctx.world_size();
  const int left = (ctx.rank() + ctx.world_size() - 1) % ctx.world_size();
  std::uint64_t payload = 0;
  // Flag 9 is written by nobody yet: the poll must say no.
  result[1] = iris::device::packet_poll(slot, 9, payload) ? 1 : 0;
  iris::device::packet_put(
      ctx, slot, 0x0123456789abcdefull ^ static_cast<std::uint64_t>(ctx.rank()), 5, right);
  result[0] = iris::device::packet_wait(ctx, slot, 5, left);
}

TEST(Packet, ThreadFormsCarryAllEightBytes) {
  iris::Context& ctx = context();
  auto* slot = static_cast<packet*>(ctx.allocate_bytes(sizeof(packet)));
  ASSERT_EQ(cudaMemset(slot, 0, sizeof(packet)), cudaSuccess);
  auto result = ctx.zeros<std::uint64_t>(2);  // ends with a barrier: every slot is zero
  thread_forms<<<1, 1>>>(ctx.device(), slot, result.data());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ctx.barrier();
  const int left = (ctx.rank() + ctx.world_size() - 1) % ctx.world_size();
  const auto got = result.to_host();
  EXPECT_EQ(got[0], 0x0123456789abcdefull ^ static_cast<std::uint64_t>(left));
  EXPECT_EQ(got[1], 0u);
  ctx.barrier();
  ctx.free_bytes(slot);
}

}  // namespace
