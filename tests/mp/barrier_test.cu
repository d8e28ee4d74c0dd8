// Barriers across ranks: barrier objects (channels of a team, split phases, every kind of group,
// two kernels on two streams at once, CUDA graphs, teams that are a strict subset of the world),
// world block-level (several blocks, each with its own channel) and whole-grid barriers, many
// rounds in one kernel, across launches, inside a CUDA graph replayed many times, and the host's
// device_barrier between kernels on a stream. In every round each participant writes the
// round number into its slot on every rank before the barrier, and after it checks that every
// participant's slot holds the round: a barrier that lets anyone through early is caught.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>

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

// ---- barrier objects --------------------------------------------------------------------------

/// One participant per (rank, group): group g of every team member writes `round` into slot
/// (g * team.size + its member index) on every member, meets the others on channel
/// `first_channel + g`, and checks every member's slot of group g. Between arrive and wait it
/// checks nothing (split phase) but spins a little, as overlapped work would. A late writer:
/// member i delays its writes by i, so a barrier that let anyone through early is caught.
template <class G, bool kSplit>
__global__ void team_rounds(const __grid_constant__ iris::device::Context ctx,
                            iris::device::Barriers bars, int first_channel, int* slots, int first,
                            int rounds, unsigned* errors) {
  const auto group = iris_test::make_group<G>();
  const iris::team team = bars.team();
  const int me = bars.member();
  const int g = static_cast<int>(iris_test::group_index<G>());
  const int channel = first_channel + g;
  int* mine = slots + g * team.size;
  for (int round = first; round < first + rounds; ++round) {
    __nanosleep(100 * me);
    for (int i = group.thread_rank(); i < team.size; i += group.num_threads())
      ctx.translate(mine + me, team, i)[0] = round;
    if constexpr (kSplit) {
      const auto token = iris::device::arrive(group, ctx, bars, channel);
      __nanosleep(500);
      iris::device::wait(group, ctx, bars, token);
    } else {
      iris::device::sync(group, ctx, bars, channel);
    }
    unsigned wrong = 0;
    for (int i = group.thread_rank(); i < team.size; i += group.num_threads())
      wrong += mine[i] != round;
    if (wrong != 0) atomicAdd(errors, wrong);
    // Nobody writes the next round before every member has checked this one.
    iris::device::sync(group, ctx, bars, channel);
  }
}

/// `groups` groups of type G per rank, each on its own channel of `bars`, on `stream`.
template <class G, bool kSplit>
void launch_team_rounds(iris::Context& ctx, const iris::Barriers& bars, int first_channel,
                        int groups, int* slots, int first, int rounds, unsigned* errors,
                        cudaStream_t stream = nullptr) {
  const unsigned blocks = iris_test::blocks_for<G>(groups);
  team_rounds<G, kSplit><<<blocks, iris_test::kThreadsPerBlock, 0, stream>>>(
      ctx.device(), bars.device(), first_channel, slots, first, rounds, errors);
}

template <class G, bool kSplit>
void run_team_rounds(const iris::team& team) {
  iris::Context& ctx = context();
  SCOPED_TRACE(std::string(iris_test::group_name<G>()) + (kSplit ? ", arrive/wait" : ", sync") +
               ", team {" + std::to_string(team.start) + ", " + std::to_string(team.size) + ", " +
               std::to_string(team.stride) + "}");
  // Two groups of G per rank (a block holds at least one G), on channels 0 and 1.
  const int groups =
      static_cast<int>(iris_test::kThreadsPerBlock / iris_test::threads_per_group<G>());
  const int used = std::max(groups, 2);
  auto bars = ctx.make_barriers(team, used);
  auto slots = ctx.full<int>(used * team.size, -1);
  auto errors = ctx.zeros<unsigned>(1);
  if (team.contains(ctx.rank())) {
    for (int launch = 0; launch < 2; ++launch)  // epochs carry over between launches
      launch_team_rounds<G, kSplit>(ctx, bars, 0, used, slots.data(), 1 + launch * kRounds, kRounds,
                                    errors.data());
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  }
  ctx.barrier();
  EXPECT_EQ(errors.to_host()[0], 0u) << "rank " << ctx.rank();
  ctx.barrier();
}

TEST(BarrierObjects, EveryKindOfGroupSyncsAndSplitsOnItsOwnChannel) {
  const iris::team world = iris::team::world(context().world_size());
  iris_test::for_each_group([&]<class G>(G) {
    run_team_rounds<G, false>(world);
    run_team_rounds<G, true>(world);
  });
}

// Teams that are a strict subset of the world: halves (2 of 4 at four ranks) and every other
// rank (stride 2; 4 of 8 at eight ranks). Only the members run; the others never come, and
// must not be waited for. Then every rank runs at once, each in its own group's team.
TEST(BarrierObjects, TeamsThatAreAStrictSubsetOfTheWorld) {
  iris::Context& ctx = context();
  const int world = ctx.world_size();
  if (world < 4 || world % 2 != 0) GTEST_SKIP() << "needs an even world of at least 4 ranks";
  const int half = world / 2;
  for (int start : {0, half}) run_team_rounds<iris::block, false>({start, half, 1});
  for (int start : {0, 1}) run_team_rounds<iris::block, true>({start, half, 2});
  for (int start : {0, 1}) run_team_rounds<iris_test::cg_warp, false>({start, half, 2});
  // Every rank at once, each with its own group's team in one object: halves, then odds/evens.
  const int me = ctx.rank();
  run_team_rounds<iris::block, true>({me / half * half, half, 1});
  run_team_rounds<iris::warps<4>, false>({me % 2, half, 2});
}

// Two kernels on two streams at once, each on channels of its own of one barrier object: the
// situation of communication overlapped with compute. Each kernel's blocks meet their namesakes.
TEST(BarrierObjects, TwoKernelsOnTwoStreamsUseDifferentChannelsAtOnce) {
  iris::Context& ctx = context();
  const iris::team world = iris::team::world(ctx.world_size());
  constexpr int kPerKernel = 2;
  auto bars = ctx.make_barriers(world, 2 * kPerKernel);
  auto slots_a = ctx.full<int>(kPerKernel * world.size, -1);
  auto slots_b = ctx.full<int>(kPerKernel * world.size, -1);
  auto errors = ctx.zeros<unsigned>(1);
  cudaStream_t a, b;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  for (int launch = 0; launch < 3; ++launch) {
    launch_team_rounds<iris::block, false>(ctx, bars, 0, kPerKernel, slots_a.data(),
                                           1 + launch * kRounds, kRounds, errors.data(), a);
    launch_team_rounds<iris::block, true>(ctx, bars, kPerKernel, kPerKernel, slots_b.data(),
                                          1 + launch * kRounds, kRounds, errors.data(), b);
  }
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(a), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(b), cudaSuccess);
  ctx.barrier();
  EXPECT_EQ(errors.to_host()[0], 0u) << "rank " << ctx.rank();
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
  ctx.barrier();
}

/// The graph form: the round number lives in device memory and advances on every replay.
__global__ void graph_team_round(const __grid_constant__ iris::device::Context ctx,
                                 iris::device::Barriers bars, int* slots, int* round,
                                 unsigned* errors) {
  const iris::team team = bars.team();
  const int me = bars.member();
  const int current = *round + 1;
  for (int i = threadIdx.x; i < team.size; i += blockDim.x)
    ctx.translate(slots + me, team, i)[0] = current;
  const auto token = iris::device::arrive(iris::block{}, ctx, bars, 0);
  iris::device::wait(iris::block{}, ctx, bars, token);
  for (int i = threadIdx.x; i < team.size; i += blockDim.x)
    if (slots[i] != current) atomicAdd(errors, 1u);
  iris::device::sync(iris::block{}, ctx, bars, 1);
  if (threadIdx.x == 0) *round = current;
}

TEST(BarrierObjects, InsideACudaGraphReplayedManyTimes) {
  iris::Context& ctx = context();
  auto bars = ctx.make_barriers(2);
  auto slots = ctx.full<int>(ctx.world_size(), -1);
  auto round = ctx.zeros<int>(1);
  auto errors = ctx.zeros<unsigned>(1);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  graph_team_round<<<1, kThreads, 0, stream>>>(ctx.device(), bars.device(), slots.data(),
                                               round.data(), errors.data());
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  constexpr int kReplays = 200;
  for (int i = 0; i < kReplays; ++i) ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ctx.barrier();
  EXPECT_EQ(errors.to_host()[0], 0u) << "rank " << ctx.rank();
  EXPECT_EQ(round.to_host()[0], kReplays);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  ctx.barrier();
}

TEST(BarrierObjects, BadTeamsAndCountsAreRefused) {
  iris::Context& ctx = context();
  const int world = ctx.world_size();
  EXPECT_THROW(ctx.make_barriers({0, world + 1, 1}, 1), iris::Error);
  EXPECT_THROW(ctx.make_barriers({1, world, 1}, 1), iris::Error);
  EXPECT_THROW(ctx.make_barriers({0, 2, 0}, 1), iris::Error);
  EXPECT_THROW(ctx.make_barriers(0), iris::Error);
  try {
    ctx.make_barriers({0, world, 2}, 1);
    if (world > 1) ADD_FAILURE() << "a team past the world was accepted";
  } catch (const iris::Error& error) {
    EXPECT_THAT(std::string(error.what()),
                testing::HasSubstr("does not fit in the world of " + std::to_string(world)));
  }
  ctx.barrier();
}

}  // namespace
