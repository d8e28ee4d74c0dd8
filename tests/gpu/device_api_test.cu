// The device API on one rank: the compile-time rules for tags and groups, exact results of
// fetching atomics, waits that hold at once, barriers at world size 1. The reports of device
// failures are in device_reports_test.cu.
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "iris/iris.hpp"

namespace {

// ---- compile-time rules ------------------------------------------------------------------------

static_assert(iris::order_fits<iris::acquire_t, iris::access::load>);
static_assert(iris::order_fits<iris::relaxed_t, iris::access::load>);
static_assert(!iris::order_fits<iris::release_t, iris::access::load>);
static_assert(!iris::order_fits<iris::acq_rel_t, iris::access::load>);
static_assert(iris::order_fits<iris::release_t, iris::access::store>);
static_assert(!iris::order_fits<iris::acquire_t, iris::access::store>);
static_assert(!iris::order_fits<iris::acq_rel_t, iris::access::store>);
static_assert(iris::order_fits<iris::acq_rel_t, iris::access::read_modify_write>);
static_assert(iris::memory_order_like<iris::relaxed_t> && !iris::memory_order_like<iris::sys_t>);
static_assert(iris::thread_scope_like<iris::gpu_t> && !iris::thread_scope_like<iris::acquire_t>);
static_assert(iris::relaxed.value == cuda::memory_order_relaxed);
static_assert(iris::sys.value == cuda::thread_scope_system);
static_assert(iris::synchronizable_group<iris::thread> && iris::synchronizable_group<iris::warp> &&
              iris::synchronizable_group<iris::warps<4>> &&
              iris::synchronizable_group<iris::block>);
static_assert(iris::cooperative_group<iris::grid> && !iris::synchronizable_group<iris::grid>);
static_assert(!iris::cooperative_group<iris::device::Context>);
static_assert(iris::warps<4>::num_threads() == 128 && iris::warp::num_threads() == 32 &&
              iris::thread::num_threads() == 1);
static_assert(iris::synchronizable_group<iris::warp_span>);
static_assert(iris::warp_span{.first = 2, .count = 4, .barrier_id = 9}.num_threads() == 128);
static_assert(iris::synchronizable_group<cooperative_groups::thread_block> &&
              iris::synchronizable_group<cooperative_groups::thread_block_tile<32>>);
static_assert(iris::kWarpsFirstBarrier == 8 && iris::kWarpsMaxGroups == 8,
              "warps<N> keeps clear of CUTLASS's named barriers 1-7");
static_assert(std::is_trivially_copyable_v<iris::device::Barriers>);
// One name per operation: the describing forms of signal_set/add are what put's last argument
// takes, and they live next to the raising forms.
static_assert(
    std::is_same_v<decltype(iris::device::signal_add(static_cast<std::uint64_t*>(nullptr), 1)),
                   iris::signal_action<std::uint64_t, iris::signal_op::add>>);

iris::Context& context() {
  static iris::Context ctx = [] {
    iris::ContextOptions options;
    options.heap_size = std::size_t{64} << 20;
    options.wait_timeout = std::chrono::seconds(20);
    return iris::Context::from_env(options);
  }();
  return ctx;
}

// ---- fetching atomics return the old value --------------------------------------------------

/// One thread runs a fixed sequence on its own rank and records every returned value; the host
/// replays the sequence and compares.
template <class T>
__global__ void atomic_sequence(const __grid_constant__ iris::device::Context ctx, T* cell,
                                T* returned) {
  namespace d = iris::device;
  int i = 0;
  *cell = T(10);
  returned[i++] = d::atomic_add(ctx, cell, T(5), 0);                                  // 10 -> 15
  returned[i++] = d::atomic_sub(ctx, cell, T(3), 0, iris::relaxed);                   // 15 -> 12
  returned[i++] = d::atomic_min(ctx, cell, T(7), 0, iris::acquire);                   // 12 -> 7
  returned[i++] = d::atomic_max(ctx, cell, T(9), 0, iris::release);                   // 7 -> 9
  returned[i++] = d::atomic_exchange(ctx, cell, T(4), 0, iris::acq_rel, iris::gpu);   // 9 -> 4
  returned[i++] = d::atomic_cas(ctx, cell, T(5), T(100), 0);                          // fails: 4
  returned[i++] = d::atomic_cas(ctx, cell, T(4), T(6), 0, iris::relaxed, iris::cta);  // 4 -> 6
  if constexpr (std::is_integral_v<T>) {
    returned[i++] = d::atomic_and(ctx, cell, T(3), 0);   // 6 -> 2
    returned[i++] = d::atomic_or(ctx, cell, T(8), 0);    // 2 -> 10
    returned[i++] = d::atomic_xor(ctx, cell, T(15), 0);  // 10 -> 5
  }
  d::atomic_add_nofetch(ctx, cell, T(1), 0);  // -> +1
  returned[i++] = d::atomic_load(ctx, cell, 0);
}

template <class T>
void check_sequence(std::vector<T> expected) {
  iris::Context& ctx = context();
  auto cell = ctx.empty<T>(1);  // the kernel sets it; `returned` it fills
  auto returned = ctx.empty<T>(expected.size());
  atomic_sequence<T><<<1, 1>>>(ctx.device(), cell.data(), returned.data());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ctx.barrier();
  EXPECT_EQ(returned.to_host(), expected) << sizeof(T) << "-byte type";
}

TEST(DeviceApi, FetchingAtomicsReturnTheOldValue) {
  check_sequence<std::int32_t>({10, 15, 12, 7, 9, 4, 4, 6, 2, 10, 6});
  check_sequence<std::uint32_t>({10, 15, 12, 7, 9, 4, 4, 6, 2, 10, 6});
  check_sequence<std::int64_t>({10, 15, 12, 7, 9, 4, 4, 6, 2, 10, 6});
  check_sequence<unsigned long long>({10, 15, 12, 7, 9, 4, 4, 6, 2, 10, 6});
  check_sequence<float>({10, 15, 12, 7, 9, 4, 4, 7});
  check_sequence<double>({10, 15, 12, 7, 9, 4, 4, 7});
}

__global__ void negative_min_max(const __grid_constant__ iris::device::Context ctx, std::int32_t* i,
                                 float* f) {
  iris::device::atomic_min(ctx, i, -5, 0);
  iris::device::atomic_max_nofetch(ctx, i + 1, -5, 0);
  iris::device::atomic_min_nofetch(ctx, f, -2.5f, 0);
  iris::device::atomic_max(ctx, f + 1, -2.5f, 0);
}

TEST(DeviceApi, MinAndMaxCompareSigned) {
  iris::Context& ctx = context();
  auto ints = ctx.full<std::int32_t>(2, 0);
  auto floats = ctx.full<float>(2, 0.0f);
  ctx.barrier();
  negative_min_max<<<1, 1>>>(ctx.device(), ints.data(), floats.data());
  ctx.barrier();
  EXPECT_EQ(ints.to_host(), (std::vector<std::int32_t>{-5, 0}));
  EXPECT_EQ(floats.to_host(), (std::vector<float>{-2.5f, 0.0f}));
}

// ---- waits that hold at once, barriers at world size 1 --------------------------------------

__global__ void waits_that_hold(const __grid_constant__ iris::device::Context ctx,
                                const std::int32_t* flag, std::int32_t* seen) {
  namespace d = iris::device;
  seen[0] = d::wait_until(ctx, flag, iris::cmp::eq, -7);
  seen[1] = d::wait_until(ctx, flag, iris::cmp::ne, 0, iris::relaxed);
  seen[2] = d::wait_until(ctx, flag, iris::cmp::lt, 0, iris::acquire, iris::gpu);
  seen[3] = d::wait_until(ctx, flag, iris::cmp::le, -7);
  seen[4] = d::wait_until(ctx, flag, iris::cmp::gt, -8);
  seen[5] = d::wait_until(ctx, flag, iris::cmp::ge, -100);
  // Group forms return what they saw, in every member.
  const std::int32_t by_block = d::wait_until(iris::block{}, ctx, flag, iris::cmp::ge, -7);
  const std::int32_t by_warps = d::wait_until(iris::warps<2>{}, ctx, flag, iris::cmp::ge, -7);
  const std::int32_t by_tile = d::wait_until(
      cooperative_groups::tiled_partition<32>(cooperative_groups::this_thread_block()), ctx, flag,
      iris::cmp::eq, -7);
  if (by_block != -7 || by_warps != -7 || by_tile != -7) atomicAdd(seen + 6, 1);
}

TEST(DeviceApi, WaitsThatHoldReturnAtOnce) {
  iris::Context& ctx = context();
  auto flag = ctx.full<std::int32_t>(1, -7);
  auto seen = ctx.zeros<std::int32_t>(7);
  waits_that_hold<<<1, 128>>>(ctx.device(), flag.data(), seen.data());
  ctx.barrier();
  auto values = seen.to_host();
  EXPECT_EQ(values[6], 0) << "members whose group wait returned another value";
  values.pop_back();
  EXPECT_EQ(values, std::vector<std::int32_t>(6, -7));
}

// Barriers at world size 1 still order the participants of this rank: block b of the grid (or
// thread t of the block) writes its slot late, after a delay that grows with b (or t), and after
// the barrier every participant checks every slot. A barrier that did nothing would let the
// early ones read stale slots.
__device__ void late_write(int* slot, int value, unsigned lateness) {
  __nanosleep(200 * lateness);
  *slot = value;
}

__global__ void barriers_alone(const __grid_constant__ iris::device::Context ctx,
                               iris::device::Barriers bars, int* block_slots, int* thread_slots,
                               unsigned* errors) {
  for (int round = 1; round <= 50; ++round) {
    // Within the block: barrier(block) and a barrier object's channel (one per block).
    late_write(thread_slots + blockIdx.x * blockDim.x + threadIdx.x, round, threadIdx.x);
    if (round % 2 == 0) {
      iris::device::barrier(iris::block{}, ctx);
    } else {
      const auto token = iris::device::arrive(iris::block{}, ctx, bars, blockIdx.x);
      iris::device::wait(iris::block{}, ctx, bars, token);
    }
    for (unsigned t = 0; t < blockDim.x; ++t)
      if (thread_slots[blockIdx.x * blockDim.x + t] != round) atomicAdd(errors, 1u);
    iris::device::barrier(iris::block{}, ctx);  // all have checked before the next round's writes
    // Across the grid.
    if (threadIdx.x == 0) late_write(block_slots + blockIdx.x, round, 16 * blockIdx.x);
    iris::device::barrier(iris::grid{}, ctx);
    if (threadIdx.x < gridDim.x && block_slots[threadIdx.x] != round) atomicAdd(errors, 1u);
    iris::device::barrier(iris::grid{}, ctx);
  }
}

TEST(DeviceApi, BarriersOfASingleRankOrderItsBlocksAndThreads) {
  iris::Context& ctx = context();
  constexpr unsigned kBlocks = 8, kThreads = 64;
  auto bars = ctx.make_barriers(kBlocks);
  auto block_slots = ctx.zeros<int>(kBlocks);
  auto thread_slots = ctx.zeros<int>(kBlocks * kThreads);
  auto errors = ctx.zeros<unsigned>(1);
  barriers_alone<<<kBlocks, kThreads>>>(ctx.device(), bars.device(), block_slots.data(),
                                        thread_slots.data(), errors.data());
  ctx.device_barrier();
  ctx.barrier();
  EXPECT_EQ(errors.to_host()[0], 0u);
}

}  // namespace
