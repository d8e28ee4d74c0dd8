// How plain stores are published (the rule in iris/device/signal.hpp), under stress: every
// round, every group of every rank writes a fresh pattern with plain stores through translated
// pointers into its slice of an inbox on every rank, then publishes it with one group signal to
// the whole team: the group syncs and its members release the flag, with no per-thread fence.
// Each rank's group waits for all the round's signals and checks every word it received. The
// same buffers are reused every round, so a store that is still in flight when the flag is seen
// (what an under-fenced publication, e.g. a signal raised before the group's sync, lets through)
// shows up as a stale or mixed word; on odd ranks the later warps of each group store late on
// purpose, so that such a signal does overtake their stores before even ranks check them.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "iris/iris.hpp"
#include "mp/common.cuh"

namespace {

using iris_test::context;

constexpr int kRounds = 300;
constexpr unsigned kBlocks = 4;
constexpr std::size_t kWords = 4096;  // per (sender, block): 16 KiB
constexpr unsigned kSkewNs = 4000;

__host__ __device__ std::uint32_t word(int sender, unsigned block, int round, std::size_t i) {
  return static_cast<std::uint32_t>(sender) * 0x9E3779B1u ^ block * 0x85EBCA77u ^
         static_cast<std::uint32_t>(round) * 0xC2B2AE3Du ^ static_cast<std::uint32_t>(i);
}

/// inbox[(sender * kBlocks + block) * kWords + i] on every rank. `ready[block]` counts the
/// signals of every sender's block `block` (world per round); `freed[block]` counts the
/// receivers that have checked (world per round), after which the senders may overwrite.
/// kUnderFenced: the variant the rule forbids, to show that this test sees the difference: the
/// leader raises the flags right after its own stores, with neither the group's sync nor a
/// release.
template <class G, bool kUnderFenced = false>
__global__ void publish_rounds(const __grid_constant__ iris::device::Context ctx,
                               std::uint32_t* inbox, std::uint64_t* ready, std::uint64_t* freed,
                               unsigned* errors, std::uint64_t* seen_too_small) {
  const auto group = iris_test::make_group<G>();
  const int rank = ctx.rank(), world = ctx.world_size();
  const iris::team everyone = iris::team::world(world);
  const unsigned b = blockIdx.x;
  const auto n = group.num_threads();
  for (int round = 1; round <= kRounds; ++round) {
    const auto expected = static_cast<std::uint64_t>(world) * round;
    // Every receiver has checked the previous round.
    iris::device::wait_until(group, ctx, freed + b, iris::cmp::ge, expected - world);
    // Skew inside the group, on odd ranks only: warp w of the group stores w * world * kSkewNs
    // late, so that a signal raised before the group's sync overtakes the later warps' stores.
    // Only odd ranks: a receiver's own group syncs (its late warps too) before it can check, so
    // if every rank were late alike the receivers would check only after every sender's late
    // warps; an even rank is not late and checks while the odd ranks' late warps still sleep,
    // at every world size. The skew grows with the world, as the leader's own stores do.
    __nanosleep(kSkewNs * static_cast<unsigned>(world) * static_cast<unsigned>(rank % 2) *
                static_cast<unsigned>(group.thread_rank() / 32));
    for (int k = 0; k < world; ++k) {
      const int peer = (rank + k) % world;  // start at different peers: mix the traffic
      std::uint32_t* slice = ctx.translate(inbox + (rank * kBlocks + b) * kWords, peer, kWords);
      for (std::size_t i = group.thread_rank(); i < kWords; i += n)
        slice[i] = word(rank, b, round, i);
    }
    if constexpr (kUnderFenced) {
      if (group.thread_rank() == 0)
        for (int peer = 0; peer < world; ++peer)
          iris::device::signal_add(ctx, ready + b, std::uint64_t{1}, peer, iris::relaxed);
    } else {
      iris::device::signal(group, ctx, iris::device::signal_add(ready + b, 1), everyone);
    }
    const std::uint64_t seen =
        iris::device::wait_until(group, ctx, ready + b, iris::cmp::ge, expected);
    if (seen < expected) atomicAdd(reinterpret_cast<unsigned long long*>(seen_too_small), 1ull);
    unsigned wrong = 0;
    for (int sender = 0; sender < world; ++sender) {
      const std::uint32_t* slice = inbox + (sender * kBlocks + b) * kWords;
      for (std::size_t i = group.thread_rank(); i < kWords; i += n)
        wrong += slice[i] != word(sender, b, round, i);
    }
    if (wrong != 0) atomicAdd(errors, wrong);
    iris::device::signal(group, ctx, iris::device::signal_add(freed + b, 1), everyone);
  }
}

/// Runs publish_rounds<G, kUnderFenced>; returns the words received wrong, summed over ranks.
template <class G, bool kUnderFenced = false>
unsigned run_publish() {
  iris::Context& ctx = context();
  SCOPED_TRACE(iris_test::group_name<G>());
  const int world = ctx.world_size();
  auto inbox = ctx.zeros<std::uint32_t>(world * kBlocks * kWords);
  auto ready = ctx.zeros<std::uint64_t>(kBlocks);
  auto freed = ctx.zeros<std::uint64_t>(kBlocks);
  auto errors = ctx.zeros<unsigned>(1);
  auto too_small = ctx.zeros<std::uint64_t>(1);
  // One group per block, whatever its type: the block has exactly the group's threads.
  publish_rounds<G, kUnderFenced><<<kBlocks, iris_test::threads_per_group<G>()>>>(
      ctx.device(), inbox.data(), ready.data(), freed.data(), errors.data(), too_small.data());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  ctx.barrier();
  const unsigned wrong = errors.to_host()[0];
  std::vector<unsigned> all(world);
  ctx.bootstrap().allgather(&wrong, all.data(), sizeof(unsigned));
  if (!kUnderFenced) {
    EXPECT_EQ(wrong, 0u) << "stale or torn words received by rank " << ctx.rank();
    EXPECT_EQ(too_small.to_host()[0], 0u) << "a group wait returned a value below its condition";
    EXPECT_EQ(ready.to_host(), std::vector<std::uint64_t>(kBlocks, std::uint64_t(world) * kRounds));
  }
  ctx.barrier();
  unsigned total = 0;
  for (unsigned w : all) total += w;
  return total;
}

// The under-fenced variant, on request (IRIS_TEST_UNDER_FENCED=1): the test must see wrong
// words, or it could not tell a correct publication from a lucky one. Not run by default: what
// an under-fenced program shows is up to the hardware's timing.
TEST(Publish, TheUnderFencedVariantIsCaught) {
  const char* requested = std::getenv("IRIS_TEST_UNDER_FENCED");
  if (requested == nullptr || std::string(requested) != "1")
    GTEST_SKIP() << "set IRIS_TEST_UNDER_FENCED=1 to run the forbidden variant";
  const unsigned wrong = run_publish<iris::block, true>();
  std::printf("under-fenced publication: %u wrong words over all ranks\n", wrong);
  EXPECT_GT(wrong, 0u) << "the stress test did not notice a publication without sync or release";
}

TEST(Publish, GroupSignalsPublishEveryMembersPlainStoresToTheWholeTeam) {
  run_publish<iris::block>();
  run_publish<iris::warps<4>>();
  run_publish<iris::warp>();
  run_publish<iris_test::span_pair>();
  run_publish<iris_test::cg_block>();
  run_publish<iris_test::cg_warp>();
}

// Rule (a): a thread publishes its own stores with its own release, here one flag per thread
// and destination, no group involved.
__global__ void publish_by_threads(const __grid_constant__ iris::device::Context ctx,
                                   std::uint32_t* inbox, std::uint64_t* ready, unsigned* errors) {
  const int rank = ctx.rank(), world = ctx.world_size();
  const int right = (rank + 1) % world, left = (rank + world - 1) % world;
  const unsigned t = threadIdx.x;
  constexpr std::size_t kPerThread = 64;
  for (int round = 1; round <= kRounds; ++round) {
    // The right neighbour has read the previous round (it acknowledges on our flag + blockDim).
    iris::device::wait_until(ctx, ready + blockDim.x + t, iris::cmp::ge,
                             static_cast<std::uint64_t>(round - 1));
    std::uint32_t* mine = ctx.translate(inbox + t * kPerThread, right, kPerThread);
    for (std::size_t i = 0; i < kPerThread; ++i) mine[i] = word(rank, t, round, i);
    iris::device::signal_set(ctx, ready + t, std::uint64_t(round), right);
    iris::device::wait_until(ctx, ready + t, iris::cmp::ge, std::uint64_t(round));
    unsigned wrong = 0;
    for (std::size_t i = 0; i < kPerThread; ++i)
      wrong += inbox[t * kPerThread + i] != word(left, t, round, i);
    if (wrong != 0) atomicAdd(errors, wrong);
    iris::device::signal_set(ctx, ready + blockDim.x + t, std::uint64_t(round), left);
  }
}

TEST(Publish, EachThreadsReleasePublishesItsOwnStores) {
  iris::Context& ctx = context();
  constexpr unsigned kThreads = 256;
  auto inbox = ctx.zeros<std::uint32_t>(kThreads * 64);
  auto ready = ctx.zeros<std::uint64_t>(2 * kThreads);
  auto errors = ctx.zeros<unsigned>(1);
  publish_by_threads<<<1, kThreads>>>(ctx.device(), inbox.data(), ready.data(), errors.data());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ctx.barrier();
  EXPECT_EQ(errors.to_host()[0], 0u) << "rank " << ctx.rank();
  ctx.barrier();
}

}  // namespace
