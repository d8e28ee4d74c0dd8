// Barriers across ranks: block-level (several blocks, each with its own channel) and whole-grid,
// many rounds in one kernel, across launches, inside a CUDA graph replayed many times, and the
// host's device_barrier between kernels on a stream. In every round each participant writes the
// round number into its slot on every rank before the barrier, and after it checks that every
// participant's slot holds the round: a barrier that lets anyone through early is caught.
#include <gtest/gtest.h>

#include <cstdint>

#include "iris/iris.hpp"
#include "mp/common.cuh"

namespace {

using iris_test::context;

constexpr int kRounds = 200;
constexpr unsigned kBlocks = 4;
constexpr unsigned kThreads = 128;

/// slots[(block * world + rank)] on every rank: what block `block` of rank `rank` last wrote.
/// Block-level barriers only order a block with its namesakes, so each block checks only the
/// slots of its namesakes; grid barriers order everyone, so each block checks every slot.
template <bool kGrid>
__device__ void write_round_then_check(const iris::device::Context& ctx, int* slots, int round,
                                       unsigned* errors) {
  const int rank = ctx.rank(), world = ctx.world_size();
  const unsigned block = blockIdx.x;
  for (int peer = threadIdx.x; peer < world; peer += blockDim.x)
    iris::device::store(ctx, slots + block * world + rank, round, peer);
  if constexpr (kGrid) {
    iris::device::barrier(iris::grid{}, ctx);
  } else {
    iris::device::barrier(iris::block{}, ctx);
  }
  const unsigned first = kGrid ? 0 : block * world;
  const unsigned count = kGrid ? gridDim.x * world : world;
  for (unsigned i = first + threadIdx.x; i < first + count; i += blockDim.x)
    if (slots[i] != round) atomicAdd(errors, 1u);
  // Nobody writes the next round before everyone has checked this one.
  if constexpr (kGrid) {
    iris::device::barrier(iris::grid{}, ctx);
  } else {
    iris::device::barrier(iris::block{}, ctx);
  }
}

template <bool kGrid>
__global__ void rounds(const __grid_constant__ iris::device::Context ctx, int* slots, int first,
                       unsigned* errors) {
  for (int round = first; round < first + kRounds; ++round)
    write_round_then_check<kGrid>(ctx, slots, round, errors);
}

template <bool kGrid>
void run_rounds() {
  iris::Context& ctx = context();
  auto slots = ctx.full<int>(kBlocks * ctx.world_size(), -1);
  auto errors = ctx.zeros<unsigned>(1);
  // Two launches: epochs carry over from one to the next without a reset.
  for (int launch = 0; launch < 2; ++launch) {
    rounds<kGrid>
        <<<kBlocks, kThreads>>>(ctx.device(), slots.data(), 1 + launch * kRounds, errors.data());
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  }
  ctx.barrier();
  EXPECT_EQ(errors.to_host()[0], 0u) << "rank " << ctx.rank();
  ctx.barrier();
}

TEST(Barrier, BlockLevelManyRoundsAcrossLaunches) {
  run_rounds<false>();
}

TEST(Barrier, WholeGridManyRoundsAcrossLaunches) {
  run_rounds<true>();
}

// In a CUDA graph: the round number lives in device memory and advances on every replay, so the
// same captured kernels check a new round each time.
template <bool kGrid>
__global__ void graph_round(const __grid_constant__ iris::device::Context ctx, int* slots,
                            int* round, unsigned* errors) {
  const int current = *round + 1;
  write_round_then_check<kGrid>(ctx, slots, current, errors);
  // Every block read *round before the barriers inside, so it may advance now.
  if (blockIdx.x == 0 && threadIdx.x == 0) *round = current;
}

TEST(Barrier, InsideACudaGraphReplayedManyTimes) {
  iris::Context& ctx = context();
  auto slots = ctx.full<int>(kBlocks * ctx.world_size(), -1);
  auto rounds_done = ctx.zeros<int>(2);
  auto errors = ctx.zeros<unsigned>(1);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  graph_round<false>
      <<<1, kThreads, 0, stream>>>(ctx.device(), slots.data(), rounds_done.data(), errors.data());
  ctx.device_barrier(stream);
  graph_round<true><<<kBlocks, kThreads, 0, stream>>>(ctx.device(), slots.data(),
                                                      rounds_done.data() + 1, errors.data());
  ctx.device_barrier(stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  constexpr int kReplays = 100;
  for (int i = 0; i < kReplays; ++i) ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ctx.barrier();
  EXPECT_EQ(errors.to_host()[0], 0u) << "rank " << ctx.rank();
  const auto done = rounds_done.to_host();
  EXPECT_EQ(done[0], kReplays);
  EXPECT_EQ(done[1], kReplays);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  ctx.barrier();
}

// The host's device_barrier orders kernels of different ranks: each round a kernel writes to
// every peer, device_barrier, a second kernel checks, device_barrier; no host synchronization.
__global__ void write_everywhere(const __grid_constant__ iris::device::Context ctx, int* slots,
                                 int round) {
  for (int peer = threadIdx.x; peer < ctx.world_size(); peer += blockDim.x)
    iris::device::store(ctx, slots + ctx.rank(), round, peer);
}

__global__ void check_all(const __grid_constant__ iris::device::Context ctx, const int* slots,
                          int round, unsigned* errors) {
  for (int r = threadIdx.x; r < ctx.world_size(); r += blockDim.x)
    if (slots[r] != round) atomicAdd(errors, 1u);
}

TEST(Barrier, HostDeviceBarrierOrdersKernelsOfAllRanks) {
  iris::Context& ctx = context();
  auto slots = ctx.full<int>(ctx.world_size(), -1);
  auto errors = ctx.zeros<unsigned>(1);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  for (int round = 1; round <= kRounds; ++round) {
    write_everywhere<<<1, 32, 0, stream>>>(ctx.device(), slots.data(), round);
    ctx.device_barrier(stream);
    check_all<<<1, 32, 0, stream>>>(ctx.device(), slots.data(), round, errors.data());
    ctx.device_barrier(stream);
  }
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ctx.barrier();
  EXPECT_EQ(errors.to_host()[0], 0u) << "rank " << ctx.rank();
  cudaStreamDestroy(stream);
  ctx.barrier();
}

}  // namespace
