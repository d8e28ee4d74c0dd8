// Signals and waits between ranks: a ring of producers and consumers passes many rounds of
// messages, each published by a completion action (or by stores + quiet + a signal) and
// acknowledged back, so that every round reuses the same buffers. Every element of every
// message is checked on the device.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "iris/iris.hpp"
#include "mp/common.cuh"

namespace {

using iris_test::context;

constexpr int kRounds = 500;
constexpr std::size_t kMessage = 1001;  // ints, odd on purpose

__host__ __device__ int message_value(int sender, int round, std::size_t i) {
  return sender * 1000003 + round * 7919 + static_cast<int>(i);
}

enum class Publish { kSignalAdd, kSignalSet, kQuietThenSignal };

/// Each round: wait until the right neighbour has consumed the last message, write the next one
/// into its inbox and raise its `ready` flag; wait for the left neighbour's message, check it,
/// and acknowledge it. `ready` and `acks` are counters (adds) or round numbers (sets).
template <class G, Publish kPublish>
__global__ void ring(const __grid_constant__ iris::device::Context ctx, int* inbox, int* outbox,
                     std::uint64_t* ready, std::uint32_t* ready_epoch, std::uint64_t* acks,
                     unsigned* errors) {
  const auto group = iris_test::make_group<G>();
  const int rank = ctx.rank(), world = ctx.world_size();
  const int right = (rank + 1) % world, left = (rank + world - 1) % world;
  for (int round = 1; round <= kRounds; ++round) {
    iris::device::wait_until(group, ctx, acks, iris::cmp::ge, round - 1);
    for (std::size_t i = group.thread_rank(); i < kMessage; i += group.num_threads())
      outbox[i] = message_value(rank, round, i);
    group.sync();
    if constexpr (kPublish == Publish::kSignalAdd) {
      iris::device::put(group, ctx, inbox, outbox, kMessage, right,
                        iris::device::signal_add(ready, 1));
    } else if constexpr (kPublish == Publish::kSignalSet) {
      iris::device::put(group, ctx, inbox, outbox, kMessage, right,
                        iris::device::signal_set(ready_epoch, round));
    } else {
      for (std::size_t i = group.thread_rank(); i < kMessage; i += group.num_threads())
        iris::device::store(ctx, inbox + i, outbox[i], right);
      iris::device::quiet();
      group.sync();
      if (group.thread_rank() == 0)
        iris::device::signal_set(ctx, ready_epoch, std::uint32_t(round), right, iris::relaxed);
    }
    if constexpr (kPublish == Publish::kSignalAdd) {
      iris::device::wait_until(group, ctx, ready, iris::cmp::ge, round);
    } else {
      iris::device::wait_until(group, ctx, ready_epoch, iris::cmp::eq, round);
    }
    unsigned wrong = 0;
    for (std::size_t i = group.thread_rank(); i < kMessage; i += group.num_threads())
      wrong += inbox[i] != message_value(left, round, i);
    if (wrong != 0) atomicAdd(errors, wrong);
    group.sync();  // everyone has read the inbox before the sender may overwrite it
    if (group.thread_rank() == 0) iris::device::signal_add(ctx, acks, std::uint64_t{1}, left);
  }
}

template <class G, Publish kPublish>
void run_ring(const char* publish) {
  iris::Context& ctx = context();
  SCOPED_TRACE(std::string(iris_test::group_name<G>()) + ", " + publish);
  auto inbox = ctx.zeros<int>(kMessage);
  auto outbox = ctx.zeros<int>(kMessage);
  auto ready = ctx.zeros<std::uint64_t>(1);
  auto ready_epoch = ctx.zeros<std::uint32_t>(1);
  auto acks = ctx.zeros<std::uint64_t>(1);
  auto errors = ctx.zeros<unsigned>(1);
  ring<G, kPublish><<<1, iris_test::threads_per_group<G>()>>>(
      ctx.device(), inbox.data(), outbox.data(), ready.data(), ready_epoch.data(), acks.data(),
      errors.data());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ctx.barrier();
  EXPECT_EQ(errors.to_host()[0], 0u) << "wrong elements received by rank " << ctx.rank();
  EXPECT_EQ(acks.to_host()[0], std::uint64_t{kRounds});
  if (kPublish == Publish::kSignalAdd) EXPECT_EQ(ready.to_host()[0], std::uint64_t{kRounds});
  ctx.barrier();
}

template <Publish kPublish>
void run_ring_all_groups(const char* publish) {
  iris_test::for_each_group([&]<class G>(G) { run_ring<G, kPublish>(publish); });
}

TEST(Signal, MessagesRoundTheRingWithSignalAdd) {
  run_ring_all_groups<Publish::kSignalAdd>("put + signal_add");
}

TEST(Signal, MessagesRoundTheRingWithSignalSet) {
  run_ring_all_groups<Publish::kSignalSet>("put + signal_set");
}

TEST(Signal, MessagesRoundTheRingWithStoresQuietAndRelaxedSignal) {
  run_ring_all_groups<Publish::kQuietThenSignal>("store + quiet + relaxed signal_set");
}

// Comparisons on signed flags: the right neighbour counts the flag down past zero; waits for lt,
// le, ne and eq only hold once it is negative, which an unsigned comparison would get wrong.
__global__ void count_down(const __grid_constant__ iris::device::Context ctx, std::int64_t* flag,
                           std::int64_t* seen) {
  const int rank = ctx.rank(), world = ctx.world_size();
  const int right = (rank + 1) % world;
  if (threadIdx.x == 0) {
    for (std::int64_t v = 3; v >= -3; --v) iris::device::signal_set(ctx, flag, v, right);
  } else {
    seen[0] = iris::device::wait_until(ctx, flag, iris::cmp::lt, std::int64_t{0});
    seen[1] = iris::device::wait_until(ctx, flag, iris::cmp::le, std::int64_t{-3});
    seen[2] = iris::device::wait_until(ctx, flag, iris::cmp::eq, std::int64_t{-3});
    seen[3] = iris::device::wait_until(ctx, flag, iris::cmp::ne, std::int64_t{100});
    seen[4] = iris::device::wait_until(ctx, flag, iris::cmp::gt, std::int64_t{-4}, iris::relaxed);
  }
}

TEST(Signal, SignedComparisons) {
  iris::Context& ctx = context();
  auto flag = ctx.full<std::int64_t>(1, 100);
  auto seen = ctx.zeros<std::int64_t>(5);
  count_down<<<1, 2>>>(ctx.device(), flag.data(), seen.data());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ctx.barrier();
  const auto values = seen.to_host();
  EXPECT_LT(values[0], 0);
  EXPECT_EQ(values[1], -3);
  EXPECT_EQ(values[2], -3);
  EXPECT_EQ(values[3], -3);
  EXPECT_EQ(values[4], -3);
  ctx.barrier();
}

// copy with a completion action between two other ranks: rank r moves rank r+1's data into rank
// r+2's buffer and raises r+2's flag; each rank then waits for its flag and checks.
__global__ void relay(const __grid_constant__ iris::device::Context ctx, int* buffer,
                      const int* source, std::uint64_t* flag, unsigned* errors, std::size_t n) {
  const int rank = ctx.rank(), world = ctx.world_size();
  iris::device::copy(iris::block{}, ctx, buffer, source, n, (rank + 2) % world, (rank + 1) % world,
                     iris::device::signal_add(flag, 1));
  iris::device::wait_until(iris::block{}, ctx, flag, iris::cmp::ge, 1);
  const int from = (rank + world - 1) % world;
  unsigned wrong = 0;
  for (std::size_t i = threadIdx.x; i < n; i += blockDim.x)
    wrong += buffer[i] != message_value(from, 0, i);
  if (wrong != 0) atomicAdd(errors, wrong);
}

TEST(Signal, CopyBetweenTwoOtherRanksRaisesTheDestinationsFlag) {
  iris::Context& ctx = context();
  constexpr std::size_t kCount = 4097;
  auto source = ctx.zeros<int>(kCount);
  std::vector<int> values(kCount);
  for (std::size_t i = 0; i < kCount; ++i) values[i] = message_value(ctx.rank(), 0, i);
  source.copy_from_host(values);
  auto buffer = ctx.full<int>(kCount, -1);
  auto flag = ctx.zeros<std::uint64_t>(1);
  auto errors = ctx.zeros<unsigned>(1);
  relay<<<1, 256>>>(ctx.device(), buffer.data(), source.data(), flag.data(), errors.data(), kCount);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ctx.barrier();
  EXPECT_EQ(errors.to_host()[0], 0u);
  EXPECT_EQ(flag.to_host()[0], 1u);
  ctx.barrier();
}

}  // namespace
