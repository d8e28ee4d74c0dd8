// Atomics under contention from every rank: each of kContenders threads per rank applies the
// operation to every rank's copy of a target, for every operation x element type x valid order
// (system scope), then each rank checks its own copy. Narrower scopes (gpu, cta) are exercised on
// the rank's own memory, where they are valid. Fetching results are checked by tickets: adds of 1
// hand out every value exactly once, and exchanges pass every value on exactly once.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "iris/iris.hpp"
#include "mp/common.cuh"

namespace {

using iris_test::context;

constexpr int kContenders = 32;  // threads per rank (one warp)
constexpr int kCasRounds = 4;    // increments per contender in the compare-and-swap test

enum class Op { kAdd, kSub, kAnd, kOr, kXor, kMin, kMax };
constexpr const char* kOpNames[] = {"add", "sub", "and", "or", "xor", "min", "max"};

template <class T>
constexpr bool kIsInteger = std::is_integral_v<T>;

/// What contender `id` (rank * kContenders + thread) contributes.
template <Op kOp, class T>
__host__ __device__ T contribution(int id) {
  if constexpr (kOp == Op::kAdd || kOp == Op::kSub) {
    return T(1);
  } else if constexpr (kOp == Op::kAnd) {
    return static_cast<T>(~(T(1) << (id % (8 * sizeof(T)))));
  } else if constexpr (kOp == Op::kOr || kOp == Op::kXor) {
    return static_cast<T>(T(1) << ((id * 7) % (8 * sizeof(T))));
  } else if constexpr (std::is_unsigned_v<T>) {  // beyond the signed range: compares unsigned
    return static_cast<T>((T(1) << (8 * sizeof(T) - 1)) + T((id * 7919) % 1000));
  } else {  // negative and positive
    return static_cast<T>((id * 7919) % 1000 - 500) / T(2);
  }
}

template <Op kOp, class T>
T initial() {
  if constexpr (kOp == Op::kSub) return T(100000);
  if constexpr (kOp == Op::kAnd) return static_cast<T>(~T(0));
  if constexpr (kOp == Op::kMin) return std::numeric_limits<T>::max();
  if constexpr (kOp == Op::kMax) return std::numeric_limits<T>::lowest();
  return T(0);
}

template <Op kOp, class T>
T apply(T a, T b) {
  switch (kOp) {
    case Op::kAdd:
      return static_cast<T>(a + b);
    case Op::kSub:
      return static_cast<T>(a - b);
    case Op::kMin:
      return b < a ? b : a;
    case Op::kMax:
      return a < b ? b : a;
    default:
      break;
  }
  if constexpr (kIsInteger<T>) {
    if (kOp == Op::kAnd) return a & b;
    if (kOp == Op::kOr) return a | b;
    return a ^ b;
  }
  return a;
}

template <Op kOp, bool kFetch, class T, class Order, class Scope>
__device__ void apply_atomic(const iris::device::Context& ctx, T* target, T value, int to) {
  namespace d = iris::device;
  constexpr Order o{};
  constexpr Scope s{};
#define IRIS_TEST_CASE(OP, FETCHING, NONFETCHING)      \
  if constexpr (kOp == Op::OP) {                       \
    if constexpr (kFetch) {                            \
      (void)d::FETCHING(ctx, target, value, to, o, s); \
    } else {                                           \
      d::NONFETCHING(ctx, target, value, to, o, s);    \
    }                                                  \
  }
  IRIS_TEST_CASE(kAdd, atomic_add, atomic_add_nofetch)
  IRIS_TEST_CASE(kSub, atomic_sub, atomic_sub_nofetch)
  IRIS_TEST_CASE(kMin, atomic_min, atomic_min_nofetch)
  IRIS_TEST_CASE(kMax, atomic_max, atomic_max_nofetch)
  if constexpr (kIsInteger<T>) {
    IRIS_TEST_CASE(kAnd, atomic_and, atomic_and_nofetch)
    IRIS_TEST_CASE(kOr, atomic_or, atomic_or_nofetch)
    IRIS_TEST_CASE(kXor, atomic_xor, atomic_xor_nofetch)
  }
#undef IRIS_TEST_CASE
}

/// Thread t of each rank applies its contribution to the target on ranks [first, last].
template <Op kOp, bool kFetch, class T, class Order, class Scope>
__global__ void contend(const __grid_constant__ iris::device::Context ctx, T* target, int first,
                        int last) {
  const int id = ctx.rank() * kContenders + static_cast<int>(threadIdx.x);
  for (int to = first; to <= last; ++to)
    apply_atomic<kOp, kFetch, T, Order, Scope>(ctx, target, contribution<kOp, T>(id), to);
}

template <Op kOp, bool kFetch, class T, class Order, class Scope>
void run_contention(bool own_rank_only) {
  iris::Context& ctx = context();
  const int world = ctx.world_size();
  SCOPED_TRACE(std::string(kOpNames[int(kOp)]) + (kFetch ? "" : "_nofetch") + " of " +
               std::to_string(sizeof(T)) + "-byte " + (kIsInteger<T> ? "integers" : "floats") +
               ", order " + std::to_string(int(Order::value)) + ", scope " +
               std::to_string(int(Scope::value)));
  auto target = iris_test::filled<T>(ctx, 1, initial<kOp, T>());
  const int first = own_rank_only ? ctx.rank() : 0;
  const int last = own_rank_only ? ctx.rank() : world - 1;
  contend<kOp, kFetch, T, Order, Scope>
      <<<1, kContenders>>>(ctx.device(), target.data(), first, last);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ctx.barrier();
  T expected = initial<kOp, T>();
  const int contributors = own_rank_only ? 1 : world;
  const int first_id = own_rank_only ? ctx.rank() * kContenders : 0;
  for (int id = first_id; id < first_id + contributors * kContenders; ++id)
    expected = apply<kOp, T>(expected, contribution<kOp, T>(id));
  EXPECT_EQ(target.to_host()[0], expected) << "rank " << ctx.rank();
  ctx.barrier();
}

template <Op kOp, class T>
void run_all_orders() {
  using namespace iris;
  run_contention<kOp, true, T, relaxed_t, sys_t>(false);
  run_contention<kOp, true, T, acquire_t, sys_t>(false);
  run_contention<kOp, true, T, release_t, sys_t>(false);
  run_contention<kOp, true, T, acq_rel_t, sys_t>(false);
  run_contention<kOp, false, T, relaxed_t, sys_t>(false);
  run_contention<kOp, false, T, release_t, sys_t>(false);
  // Narrow scopes, on memory only this rank touches.
  run_contention<kOp, true, T, acq_rel_t, gpu_t>(true);
  run_contention<kOp, true, T, relaxed_t, cta_t>(true);
  run_contention<kOp, false, T, release_t, gpu_t>(true);
}

template <Op kOp>
void run_all_types() {
  run_all_orders<kOp, std::int32_t>();
  run_all_orders<kOp, std::uint32_t>();
  run_all_orders<kOp, std::int64_t>();
  run_all_orders<kOp, unsigned long long>();
  if constexpr (kOp != Op::kAnd && kOp != Op::kOr && kOp != Op::kXor) {
    run_all_orders<kOp, float>();
    run_all_orders<kOp, double>();
  }
}

TEST(Atomic, AddFromEveryRank) {
  run_all_types<Op::kAdd>();
}
TEST(Atomic, SubFromEveryRank) {
  run_all_types<Op::kSub>();
}
TEST(Atomic, AndFromEveryRank) {
  run_all_types<Op::kAnd>();
}
TEST(Atomic, OrFromEveryRank) {
  run_all_types<Op::kOr>();
}
TEST(Atomic, XorFromEveryRank) {
  run_all_types<Op::kXor>();
}
TEST(Atomic, MinFromEveryRank) {
  run_all_types<Op::kMin>();
}
TEST(Atomic, MaxFromEveryRank) {
  run_all_types<Op::kMax>();
}

// Halves: every contender adds 1 (both lanes of a pair); 8 ranks x 32 = 256 stays exact even in
// bf16.
template <class T, class Order, bool kFetch>
__global__ void add_halves(const __grid_constant__ iris::device::Context ctx, T* target) {
  for (int to = 0; to < ctx.world_size(); ++to) {
    T one;
    if constexpr (std::is_same_v<T, __half>) one = __float2half(1.0f);
    if constexpr (std::is_same_v<T, __nv_bfloat16>) one = __float2bfloat16(1.0f);
    if constexpr (std::is_same_v<T, __half2>) one = __float2half2_rn(1.0f);
    if constexpr (std::is_same_v<T, __nv_bfloat162>) one = __float2bfloat162_rn(1.0f);
    if constexpr (kFetch) {
      (void)iris::device::atomic_add(ctx, target, one, to, Order{});
    } else {
      iris::device::atomic_add_nofetch(ctx, target, one, to, Order{});
    }
  }
}

float low_of(__half v) {
  return __half2float(v);
}
float low_of(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
float low_of(__half2 v) {
  return __low2float(v);
}
float low_of(__nv_bfloat162 v) {
  return __low2float(v);
}
float high_of(__half v) {
  return __half2float(v);
}
float high_of(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
float high_of(__half2 v) {
  return __high2float(v);
}
float high_of(__nv_bfloat162 v) {
  return __high2float(v);
}

template <class T, class Order, bool kFetch>
void run_halves() {
  iris::Context& ctx = context();
  auto target = ctx.zeros<std::uint32_t>(1);  // room for a pair; zero bits are +0 in every format
  add_halves<T, Order, kFetch>
      <<<1, kContenders>>>(ctx.device(), reinterpret_cast<T*>(target.data()));
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ctx.barrier();
  const std::uint32_t bits = target.to_host()[0];
  T value;
  std::memcpy(static_cast<void*>(&value), &bits,
              sizeof(T));  // half types are not trivially copy-assignable
  const float expected = float(ctx.world_size() * kContenders);
  EXPECT_EQ(low_of(value), expected) << sizeof(T) << "-byte half type, rank " << ctx.rank();
  if (sizeof(T) == 4) EXPECT_EQ(high_of(value), expected);
  ctx.barrier();
}

template <class T>
void run_halves_all_orders() {
  using namespace iris;
  run_halves<T, relaxed_t, true>();
  run_halves<T, acquire_t, true>();
  run_halves<T, release_t, true>();
  run_halves<T, acq_rel_t, true>();
  run_halves<T, relaxed_t, false>();
  run_halves<T, release_t, false>();
}

TEST(Atomic, HalfPrecisionAddsAndPackedPairs) {
  run_halves_all_orders<__half>();
  run_halves_all_orders<__nv_bfloat16>();
  run_halves_all_orders<__half2>();
  run_halves_all_orders<__nv_bfloat162>();
}

// Tickets: every contender of every rank takes one ticket from rank r's counter (fetching add of
// 1) and marks it taken on rank r. Each ticket must be handed out exactly once.
template <class T, class Order>
__global__ void take_tickets(const __grid_constant__ iris::device::Context ctx, T* counter,
                             unsigned* taken) {
  for (int to = 0; to < ctx.world_size(); ++to) {
    const T ticket = iris::device::atomic_add(ctx, counter, T(1), to, Order{});
    iris::device::atomic_add_nofetch(ctx, taken + static_cast<std::size_t>(ticket), 1u, to,
                                     iris::relaxed);
  }
}

template <class T, class Order>
void run_tickets() {
  iris::Context& ctx = context();
  const std::size_t tickets = std::size_t(ctx.world_size()) * kContenders;
  auto counter = iris_test::filled<T>(ctx, 1, T(0));
  auto taken = ctx.zeros<unsigned>(tickets);
  take_tickets<T, Order><<<1, kContenders>>>(ctx.device(), counter.data(), taken.data());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ctx.barrier();
  EXPECT_EQ(counter.to_host()[0], T(tickets));
  const auto marks = taken.to_host();
  for (std::size_t i = 0; i < tickets; ++i)
    ASSERT_EQ(marks[i], 1u) << "ticket " << i << " on rank " << ctx.rank();
  ctx.barrier();
}

TEST(Atomic, FetchingAddHandsOutEveryTicketOnce) {
  run_tickets<std::int32_t, iris::relaxed_t>();
  run_tickets<std::uint32_t, iris::acquire_t>();
  run_tickets<std::int64_t, iris::release_t>();
  run_tickets<std::uint64_t, iris::acq_rel_t>();
}

// Exchange: contender id puts id + 1 into rank r's slot and marks the value it got back. The
// values handed back are the initial 0 and every id + 1 except the one left in the slot.
template <class T, class Order>
__global__ void exchange_ids(const __grid_constant__ iris::device::Context ctx, T* slot,
                             unsigned* returned) {
  const int id = ctx.rank() * kContenders + static_cast<int>(threadIdx.x);
  for (int to = 0; to < ctx.world_size(); ++to) {
    const T old = iris::device::atomic_exchange(ctx, slot, T(id + 1), to, Order{});
    iris::device::atomic_add_nofetch(ctx, returned + static_cast<std::size_t>(old), 1u, to,
                                     iris::relaxed);
  }
}

template <class T, class Order>
void run_exchange() {
  iris::Context& ctx = context();
  const std::size_t ids = std::size_t(ctx.world_size()) * kContenders;
  auto slot = iris_test::filled<T>(ctx, 1, T(0));
  auto returned = ctx.zeros<unsigned>(ids + 1);
  exchange_ids<T, Order><<<1, kContenders>>>(ctx.device(), slot.data(), returned.data());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ctx.barrier();
  const auto last = static_cast<std::size_t>(slot.to_host()[0]);
  ASSERT_GE(last, 1u);
  ASSERT_LE(last, ids);
  const auto marks = returned.to_host();
  for (std::size_t v = 0; v <= ids; ++v)
    ASSERT_EQ(marks[v], v == last ? 0u : 1u) << "value " << v << " on rank " << ctx.rank();
  ctx.barrier();
}

TEST(Atomic, ExchangePassesEveryValueOnOnce) {
  using namespace iris;
  run_exchange<std::int32_t, relaxed_t>();
  run_exchange<std::uint32_t, acquire_t>();
  run_exchange<std::int64_t, release_t>();
  run_exchange<std::uint64_t, acq_rel_t>();
  run_exchange<float, acq_rel_t>();
  run_exchange<double, relaxed_t>();
}

// Compare-and-swap: every contender increments every rank's counter kCasRounds times with a
// retry loop; no increment may be lost.
template <class T, class Order>
__global__ void cas_increments(const __grid_constant__ iris::device::Context ctx, T* counter) {
  for (int to = 0; to < ctx.world_size(); ++to) {
    for (int round = 0; round < kCasRounds; ++round) {
      T seen = iris::device::atomic_load(ctx, counter, to, iris::relaxed);
      for (;;) {
        const T old = iris::device::atomic_cas(ctx, counter, seen, T(seen + T(1)), to, Order{});
        if (old == seen) break;
        seen = old;
      }
    }
  }
}

template <class T, class Order>
void run_cas() {
  iris::Context& ctx = context();
  auto counter = iris_test::filled<T>(ctx, 1, T(0));
  cas_increments<T, Order><<<1, kContenders>>>(ctx.device(), counter.data());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ctx.barrier();
  EXPECT_EQ(counter.to_host()[0], T(ctx.world_size() * kContenders * kCasRounds))
      << "rank " << ctx.rank();
  ctx.barrier();
}

template <class T>
void run_cas_all_orders() {
  using namespace iris;
  run_cas<T, relaxed_t>();
  run_cas<T, acquire_t>();
  run_cas<T, release_t>();
  run_cas<T, acq_rel_t>();
}

TEST(Atomic, CompareExchangeLosesNoIncrement) {
  run_cas_all_orders<std::int32_t>();
  run_cas_all_orders<std::uint32_t>();
  run_cas_all_orders<long long>();
  run_cas_all_orders<std::uint64_t>();
  run_cas_all_orders<float>();
  run_cas_all_orders<double>();
}

// Loads and stores: each rank stores (release) its rank into slot `rank` of every peer, then the
// peers' values are read back with acquire and relaxed loads after a barrier.
template <class T>
__global__ void store_and_load(const __grid_constant__ iris::device::Context ctx, T* slots,
                               T* seen) {
  const int rank = ctx.rank(), world = ctx.world_size();
  for (int to = 0; to < world; ++to) {
    if (to % 2) {
      iris::device::atomic_store(ctx, slots + rank, T(rank + 1), to, iris::release);
    } else {
      iris::device::atomic_store(ctx, slots + rank, T(rank + 1), to, iris::relaxed);
    }
  }
  iris::device::barrier(iris::block{}, ctx);
  for (int from = 0; from < world; ++from) {
    seen[from] = from % 2 ? iris::device::atomic_load(ctx, slots + from, from, iris::acquire)
                          : iris::device::atomic_load(ctx, slots + from, from, iris::relaxed);
  }
}

template <class T>
void run_store_and_load() {
  iris::Context& ctx = context();
  const int world = ctx.world_size();
  auto slots = ctx.zeros<T>(world);
  auto seen = ctx.zeros<T>(world);
  store_and_load<T><<<1, 1>>>(ctx.device(), slots.data(), seen.data());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ctx.barrier();
  const auto mine = slots.to_host();
  const auto loaded = seen.to_host();
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(mine[r], T(r + 1)) << "slot " << r;
    EXPECT_EQ(loaded[r], T(r + 1)) << "rank " << r << "'s own slot";
  }
  ctx.barrier();
}

TEST(Atomic, StoresAndLoadsOnEveryRank) {
  run_store_and_load<std::int32_t>();
  run_store_and_load<std::uint64_t>();
  run_store_and_load<float>();
  run_store_and_load<double>();
}

}  // namespace
