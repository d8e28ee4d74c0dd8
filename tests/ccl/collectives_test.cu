// Every collective of iris::ccl against host-computed results: every reduction type x operator
// x algorithm, counts from 1 element to a few MiB (odd ones, and pointers one element off
// alignment), in and out of place, on the world and on a strict subset (half the ranks,
// stride 2). Outputs are poisoned first and every element is compared bit for bit. The
// reduce_scatter's reduction order (team order for pull, ring order for the ring) is checked
// bit for bit on random floats. The all_reduces in packets are also run across the wrap of
// their 32-bit flags, and send/recv with ends of different sizes and budgets.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ccl/common.cuh"
#include "iris/ccl/detail/workspace.hpp"

namespace {

using namespace ccl_test;
using iris_test::context;

constexpr std::size_t kArenaBytes = std::size_t{48} << 20;

/// Two symmetric arenas (inputs and outputs) for every test of this binary.
struct Arenas {
  std::byte* a;
  std::byte* b;
};
Arenas& arenas() {
  static Arenas arenas = [] {
    iris::Context& ctx = context();
    Arenas out;
    out.a = static_cast<std::byte*>(ctx.allocate_bytes(kArenaBytes));
    out.b = static_cast<std::byte*>(ctx.allocate_bytes(kArenaBytes));
    return out;
  }();
  return arenas;
}

const std::vector<std::size_t> kCounts = {1, 2, 3, 17, 255, 1000, 4097, 65537, 262147};

std::string where(const char* what, const char* type, ReduceOp op, Algorithm a, std::size_t count,
                  bool in_place, std::size_t i) {
  return std::string(what) + " " + type + " " + std::string(iris::ccl::to_string(op)) + " " +
         std::string(iris::ccl::to_string(a)) + " count " + std::to_string(count) +
         (in_place ? " in place" : " out of place") + ": first wrong element " + std::to_string(i) +
         " on rank " + std::to_string(context().rank());
}

template <class T>
void fill_input(T* device, ReduceOp op, int rank, std::size_t count, std::size_t parts = 1) {
  std::vector<T> host(count * parts);
  for (std::size_t p = 0; p < parts; ++p)
    for (std::size_t i = 0; i < count; ++i) host[p * count + i] = make<T>(op, rank, p * count + i);
  upload(device, host.data(), host.size() * sizeof(T));
}

template <class T>
void check_all_reduce(iris::ccl::Communicator& comm, Algorithm algorithm, ReduceOp op,
                      std::size_t count, bool in_place, std::size_t misalign,
                      iris::ccl::Options options = {}) {
  const int rank = context().rank();
  T* src = reinterpret_cast<T*>(arenas().a) + misalign;
  T* dst = in_place ? src : reinterpret_cast<T*>(arenas().b) + misalign;
  if (!in_place) poison(dst, count * sizeof(T));
  fill_input(src, op, rank, count);
  options.algorithm = algorithm;
  comm.all_reduce(dst, src, count, op, nullptr, options);
  const auto bytes = download(dst, count * sizeof(T));
  const T* got = reinterpret_cast<const T*>(bytes.data());
  const auto ranks = members(comm);
  for (std::size_t i = 0; i < count; ++i) {
    if (!same_bits(got[i], expected<T>(op, ranks, i))) {
      ADD_FAILURE() << where("all_reduce", type_name(T{}), op, algorithm, count, in_place, i);
      return;
    }
  }
}

void all_reduce_everything(iris::ccl::Communicator& comm) {
  for_each_type([&](auto t) {
    using T = decltype(t);
    for (Algorithm algorithm :
         {Algorithm::kOneShot, Algorithm::kOneShotPull, Algorithm::kOneShotPush,
          Algorithm::kTwoShot, Algorithm::kTwoShotPackets}) {
      for (ReduceOp op : kOps) {
        for (std::size_t count : kCounts) {
          for (bool in_place : {false, true}) {
            if (!comm.cannot_run(Collective::kAllReduce, algorithm, count * sizeof(T), in_place)
                     .empty())
              continue;
            check_all_reduce<T>(comm, algorithm, op, count, in_place, count % 2);
          }
        }
      }
    }
  });
}

TEST(CclAllReduce, EveryTypeOpAlgorithmCountInAndOutOfPlace) {
  all_reduce_everything(world());
}

TEST(CclAllReduce, StrictSubsetTeam) {
  if (iris::ccl::Communicator* half = halves()) all_reduce_everything(*half);
}

TEST(CclAllReduce, FourMiBFloat) {
  for (Algorithm a : {Algorithm::kOneShotPull, Algorithm::kTwoShot})
    check_all_reduce<float>(world(), a, ReduceOp::kSum, std::size_t{1} << 20, false, 0);
  check_all_reduce<float>(world(), Algorithm::kTwoShot, ReduceOp::kSum, std::size_t{1} << 20, true,
                          0);
}

/// Sets the count of calls a communicator's team has completed on this rank (the next call's
/// epoch is one more), as 2^32 calls would: every member sets the same count between calls.
void set_completed_calls(iris::ccl::Communicator& comm, std::uint64_t calls) {
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  auto* control = reinterpret_cast<iris::ccl::detail::Control*>(comm.device().workspace);
  ASSERT_EQ(cudaMemcpy(&control->team.value, &calls, sizeof(calls), cudaMemcpyHostToDevice),
            cudaSuccess);
  context().barrier();
}

// The all_reduces in packets across the 2^32 wrap of their 32-bit flags. Member 0 comes late to
// each call, so the others read its slots before its packets are there: a slot whose old packet
// carried the call's flag (written 2^32 calls before, or the empty slots at the round whose low
// bits are 0) would pass for member 0's packet, and the sum would miss or repeat its share.
TEST(CclAllReduce, PacketsStayExactAcrossTheFlagsWrap) {
  constexpr std::uint64_t kWrap = std::uint64_t{1} << 32;
  for (Algorithm algorithm : {Algorithm::kOneShot, Algorithm::kTwoShotPackets}) {
    SCOPED_TRACE(iris::ccl::to_string(algorithm));
    iris::ccl::Communicator comm(context());  // fresh slots: all empty
    const int n = comm.size();
    const auto ranks = members(comm);
    float* src = reinterpret_cast<float*>(arenas().a);
    float* dst = reinterpret_cast<float*>(arenas().b);
    int call = 0;
    // (epoch of the call, floats): a message, then a larger one at the round whose low bits are
    // 0 (slots past the first never written), then a smaller one 2^32 rounds after it (every
    // slot it reads last held a packet of the same low bits).
    const std::pair<std::uint64_t, std::size_t> steps[] = {{kWrap - 2, 16384},
                                                           {kWrap - 1, 1000},
                                                           {kWrap, 32768},
                                                           {2 * kWrap, 4096},
                                                           {2 * kWrap + 1, 5}};
    for (const auto& [epoch, count] : steps) {
      SCOPED_TRACE(testing::Message() << "epoch " << epoch << ", " << count << " floats");
      ++call;
      set_completed_calls(comm, epoch - 1);
      std::vector<float> host(count);
      for (std::size_t i = 0; i < count; ++i)
        host[i] = static_cast<float>((context().rank() + 1) * call + static_cast<int>(i % 7));
      upload(src, host.data(), count * sizeof(float));
      poison(dst, count * sizeof(float));
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      context().barrier();
      if (comm.index() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      comm.all_reduce(dst, src, count, ReduceOp::kSum, nullptr, {.algorithm = algorithm});
      const auto bytes = download(dst, count * sizeof(float));
      const float* got = reinterpret_cast<const float*>(bytes.data());
      float ranks_sum = 0;
      for (int r : ranks) ranks_sum += static_cast<float>(r + 1);
      for (std::size_t i = 0; i < count; ++i) {
        const float want = ranks_sum * call + static_cast<float>(n * static_cast<int>(i % 7));
        if (got[i] != want) {
          ADD_FAILURE() << "element " << i << ": " << got[i] << ", want " << want;
          break;
        }
      }
      context().barrier();  // nobody refills src before every member's call is done
    }
  }
}

TEST(CclAllReduce, ForcedAlgorithmThatCannotRunIsAnError) {
  auto& comm = world();
  float* buf = reinterpret_cast<float*>(arenas().a);
  for (Algorithm bounded :
       {Algorithm::kOneShot, Algorithm::kTwoShotPackets, Algorithm::kOneShotPush}) {
    const std::size_t most = comm.message_capacity(bounded);
    EXPECT_TRUE(comm.cannot_run(Collective::kAllReduce, bounded, most).empty());
    const std::size_t too_many = most / sizeof(float) + 1;
    EXPECT_FALSE(
        comm.cannot_run(Collective::kAllReduce, bounded, too_many * sizeof(float)).empty());
    EXPECT_THROW(comm.all_reduce(buf, buf + too_many, too_many, ReduceOp::kSum, nullptr,
                                 {.algorithm = bounded}),
                 iris::Error);
  }
  EXPECT_THROW(comm.message_capacity(Algorithm::kTwoShot), iris::Error);
  EXPECT_THROW(comm.all_reduce(buf, buf, 16, ReduceOp::kSum, nullptr,
                               {.algorithm = Algorithm::kOneShotPull}),
               iris::Error);
  std::vector<float> host(16);
  EXPECT_THROW(comm.all_reduce(host.data(), host.data(), 16, ReduceOp::kSum, nullptr), iris::Error);
  EXPECT_THROW(comm.all_reduce(buf + 1, buf, 16, ReduceOp::kSum, nullptr), iris::Error);
  EXPECT_THROW(comm.reduce(buf, buf + 64, 16, ReduceOp::kSum, comm.size(), nullptr), iris::Error);
}

/// A call may take at most the blocks that every member can keep resident at once (its blocks
/// wait for each other's, so a larger grid can hang): more is an error, at construction and per
/// call, and a grid of the limit itself runs. 512-thread blocks of the reducing kernels fit one
/// per SM, which puts the limit below the channel limit (128) when ranks share a GPU.
TEST(CclBudget, MoreBlocksThanFitAreAnErrorAndTheLimitRuns) {
  auto& comm = world();
  for (Collective c : {Collective::kAllReduce, Collective::kAllGather})
    EXPECT_GE(comm.block_limit(c), comm.max_blocks(c));
  constexpr iris::ccl::CommunicatorOptions kWide{
      .packet_bytes = 1 << 20, .staging_bytes = 0, .threads = 512};
  iris::ccl::Communicator wide(context(), kWide);
  const int limit = wide.block_limit(Collective::kAllReduce);
  ASSERT_GE(limit, wide.max_blocks(Collective::kAllReduce));
  if (limit >= 128) GTEST_SKIP() << "every rank can keep 128 blocks resident (the channel limit)";
  iris::ccl::CommunicatorOptions over = kWide;
  over.max_blocks = limit + 1;
  EXPECT_THROW(iris::ccl::Communicator(context(), over), iris::Error);
  float* buf = reinterpret_cast<float*>(arenas().a);
  EXPECT_THROW(wide.all_reduce(buf, buf, 16, ReduceOp::kSum, nullptr, {.max_blocks = limit + 1}),
               iris::Error);
  // Grids of exactly `limit` blocks: 1 KiB per block (two-shot), 256 bytes (one-shot packets).
  const auto n = static_cast<std::size_t>(limit);
  check_all_reduce<std::int32_t>(wide, Algorithm::kTwoShot, ReduceOp::kSum, n * 256, false, 0,
                                 {.max_blocks = limit, .chunk_bytes = 1024});
  check_all_reduce<std::int32_t>(wide, Algorithm::kOneShot, ReduceOp::kSum, n * 64, false, 0,
                                 {.max_blocks = limit, .chunk_bytes = 256});
}

/// The world again, with 16 KiB of ring staging: a call of a few blocks gets slots of a few
/// hundred bytes, so that the ring reduce_scatter goes through many sub-chunks and groups
/// (the default staging holds a whole share of these counts in one slot).
iris::ccl::Communicator& small_staging() {
  static iris::ccl::Communicator comm(context(), {.staging_bytes = 16 << 10});
  return comm;
}

template <class T>
void check_reduce_scatter(iris::ccl::Communicator& comm, Algorithm algorithm, ReduceOp op,
                          std::size_t count, bool in_place, int max_blocks = 0) {
  const int rank = context().rank();
  const int n = comm.size();
  T* src = reinterpret_cast<T*>(arenas().a);
  T* dst = in_place ? src + comm.index() * count : reinterpret_cast<T*>(arenas().b);
  if (!in_place) poison(dst, count * sizeof(T));
  fill_input(src, op, rank, count, n);
  comm.reduce_scatter(dst, src, count, op, nullptr,
                      {.algorithm = algorithm, .max_blocks = max_blocks});
  const auto bytes = download(dst, count * sizeof(T));
  const T* got = reinterpret_cast<const T*>(bytes.data());
  const auto ranks = members(comm);
  for (std::size_t i = 0; i < count; ++i) {
    if (!same_bits(got[i], expected<T>(op, ranks, comm.index() * count + i))) {
      ADD_FAILURE() << where("reduce_scatter", type_name(T{}), op, algorithm, count, in_place, i)
                    << " (team size " << n << ", max_blocks " << max_blocks << ")";
      return;
    }
  }
}

TEST(CclReduceScatter, EveryTypeOpAlgorithmCountInAndOutOfPlace) {
  for (iris::ccl::Communicator* comm : {&world(), halves()}) {
    if (!comm) continue;
    for_each_type([&](auto t) {
      using T = decltype(t);
      for (Algorithm algorithm : {Algorithm::kPull, Algorithm::kRing})
        for (ReduceOp op : kOps)
          for (std::size_t count : {1, 3, 1000, 4096, 4097, 65536, 65537})
            for (bool in_place : {false, true})
              check_reduce_scatter<T>(*comm, algorithm, op, count, in_place);
    });
  }
}

TEST(CclReduceScatter, RingThroughManySmallStagingSlots) {
  // 1 to 3 blocks, slots of 16 KiB / blocks / 4: dozens of sub-chunks per block, a last group
  // with fewer sub-chunks than the others, a last sub-chunk shorter than a slot.
  auto& comm = small_staging();
  for_each_type([&](auto t) {
    using T = decltype(t);
    for (int blocks : {1, 3})
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg})
        for (std::size_t count : {1000, 4096, 65537})
          for (bool in_place : {false, true})
            check_reduce_scatter<T>(comm, Algorithm::kRing, op, count, in_place, blocks);
  });
  // The default budget: as many blocks as the staging takes (16 of 1 KiB each).
  check_reduce_scatter<float>(comm, Algorithm::kRing, ReduceOp::kSum, 262147, false);
  check_reduce_scatter<std::uint8_t>(comm, Algorithm::kRing, ReduceOp::kSum, 262144, true);
}

/// A float of [-1, 1) with 24 random bits, the same on every rank for (r, i): sums of them
/// round, so their order shows in the bits.
float random_float(int r, std::size_t i) {
  std::uint64_t h = (static_cast<std::uint64_t>(r) << 40) ^ (i * 0x9E3779B97F4A7C15ull);
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return static_cast<float>(static_cast<std::int64_t>(h >> 40) - (1 << 23)) / (1 << 23);
}

/// The order each algorithm documents: pull adds part j in team order (member 0 first), the
/// ring in ring order (member j + 1 first, member j last), in fp32 and rounded once. The host
/// adds the same floats in the same order and every element must have the same bits, on every
/// run (three here).
template <class T>
void check_reduction_order(iris::ccl::Communicator& comm, Algorithm algorithm, std::size_t count,
                           int max_blocks) {
  const int n = comm.size();
  const int me = comm.index();
  const auto ranks = members(comm);
  T* src = reinterpret_cast<T*>(arenas().a);
  T* dst = reinterpret_cast<T*>(arenas().b);
  auto to_t = [](float v) {
    if constexpr (std::is_same_v<T, __half>)
      return __float2half_rn(v);
    else
      return v;
  };
  auto to_float = [](T v) {
    if constexpr (std::is_same_v<T, __half>)
      return __half2float(v);
    else
      return v;
  };
  std::vector<T> mine(n * count);
  for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = to_t(random_float(context().rank(), i));
  upload(src, mine.data(), mine.size() * sizeof(T));
  std::vector<T> want(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t at = me * count + i;
    auto x = [&](int k) { return to_float(to_t(random_float(ranks[k], at))); };
    float acc;
    if (algorithm == Algorithm::kRing) {
      acc = x((me + 1) % n);
      for (int j = 2; j <= n; ++j) acc += x((me + j) % n);
    } else {
      acc = x(0);
      for (int k = 1; k < n; ++k) acc += x(k);
    }
    want[i] = to_t(acc);
  }
  for (int run = 0; run < 3; ++run) {
    poison(dst, count * sizeof(T));
    comm.reduce_scatter(dst, src, count, ReduceOp::kSum, nullptr,
                        {.algorithm = algorithm, .max_blocks = max_blocks});
    const auto bytes = download(dst, count * sizeof(T));
    const T* got = reinterpret_cast<const T*>(bytes.data());
    for (std::size_t i = 0; i < count; ++i) {
      if (!same_bits(got[i], want[i])) {
        ADD_FAILURE() << "reduce_scatter " << iris::ccl::to_string(algorithm) << " "
                      << type_name(T{}) << " count " << count << " run " << run << ": element " << i
                      << " is " << to_float(got[i]) << ", the "
                      << (algorithm == Algorithm::kRing ? "ring" : "team") << "-order sum "
                      << to_float(want[i]) << " (rank " << context().rank() << ")";
        return;
      }
    }
  }
}

TEST(CclReduceScatter, PullAddsInTeamOrderRingInRingOrderSameBitsEveryRun) {
  for (Algorithm algorithm : {Algorithm::kPull, Algorithm::kRing}) {
    check_reduction_order<float>(world(), algorithm, 50021, 0);
    check_reduction_order<__half>(world(), algorithm, 4096, 0);
    check_reduction_order<float>(small_staging(), algorithm, 20000, 2);
    if (iris::ccl::Communicator* half = halves())
      check_reduction_order<float>(*half, algorithm, 3001, 0);
  }
}

TEST(CclReduceScatter, RingNeedsStaging) {
  auto& comm = world();
  float* buf = reinterpret_cast<float*>(arenas().a);
  EXPECT_EQ(comm.select(Collective::kReduceScatter, 4096, {.algorithm = Algorithm::kRing}),
            Algorithm::kRing);
  // The shipped table does not pick the ring (docs/ccl.md says why).
  EXPECT_EQ(comm.select(Collective::kReduceScatter, std::size_t{64} << 20), Algorithm::kPull);
  iris::ccl::Communicator none(context(), {.staging_bytes = 0});
  try {
    none.reduce_scatter(buf + 64 * comm.size(), buf, 64, ReduceOp::kSum, nullptr,
                        {.algorithm = Algorithm::kRing});
    ADD_FAILURE() << "a ring reduce_scatter without staging ran";
  } catch (const iris::Error& error) {
    EXPECT_NE(error.message().find("staging_bytes"), std::string::npos) << error.message();
  }
  EXPECT_THROW(iris::ccl::Communicator(context(), {.staging_bytes = 100}), iris::Error);
}

/// reduce to `root` by `algorithm`, `misalign` elements past the arenas' starts. Out of place the
/// members other than the root pass a null dst (the push finds the root's on its own), and their
/// arena b must stay poisoned; in place (dst == src on every member) their src must stay their
/// input: only the root's dst is written.
template <class T>
void check_reduce(iris::ccl::Communicator& comm, Algorithm algorithm, ReduceOp op,
                  std::size_t count, int root, bool in_place, std::size_t misalign = 0) {
  const int rank = context().rank();
  const bool is_root = comm.index() == root;
  T* src = reinterpret_cast<T*>(arenas().a) + misalign;
  T* out = reinterpret_cast<T*>(arenas().b) + misalign;
  T* dst = in_place ? src : out;
  poison(out, count * sizeof(T));
  fill_input(src, op, rank, count);
  comm.reduce(is_root || in_place ? dst : nullptr, src, count, op, root, nullptr,
              {.algorithm = algorithm});
  const auto bytes = download(is_root || !in_place ? dst : src, count * sizeof(T));
  const T* got = reinterpret_cast<const T*>(bytes.data());
  const auto ranks = members(comm);
  for (std::size_t i = 0; i < count; ++i) {
    const bool ok = is_root    ? same_bits(got[i], expected<T>(op, ranks, i))
                    : in_place ? same_bits(got[i], make<T>(op, rank, i))
                               : bytes[i * sizeof(T)] == std::byte{kPoison};
    if (!ok) {
      ADD_FAILURE() << where("reduce", type_name(T{}), op, algorithm, count, in_place, i)
                    << " (root " << root << ", misaligned by " << misalign << ", "
                    << (is_root    ? "the root's result"
                        : in_place ? "a member's input"
                                   : "a member's dst")
                    << ")";
      return;
    }
  }
}

TEST(CclReduce, PullPushEveryTypeOpAndRoot) {
  auto& comm = world();
  for (Algorithm algorithm : {Algorithm::kPull, Algorithm::kPush})
    for_each_type([&](auto t) {
      using T = decltype(t);
      for (ReduceOp op : kOps)
        for (int root = 0; root < comm.size(); root += std::max(1, comm.size() - 1))
          for (std::size_t count : {1, 4097})
            check_reduce<T>(comm, algorithm, op, count, root, false);
    });
}

TEST(CclReduce, PullPushInPlaceMisalignedOddCountsAndSubset) {
  for (iris::ccl::Communicator* comm : {&world(), halves()}) {
    if (!comm) continue;
    for (Algorithm algorithm : {Algorithm::kPull, Algorithm::kPush})
      for (bool in_place : {false, true})
        for (std::size_t count : {std::size_t{3}, std::size_t{1000}, std::size_t{262147}}) {
          const int root = comm->size() - 1;
          check_reduce<float>(*comm, algorithm, ReduceOp::kSum, count, root, in_place);
          check_reduce<__half>(*comm, algorithm, ReduceOp::kMax, count, 0, in_place, 3);
          check_reduce<std::int64_t>(*comm, algorithm, ReduceOp::kSum, count, root, in_place, 1);
        }
  }
  // The shipped table's reduce is the push.
  EXPECT_EQ(world().select(Collective::kReduce, std::size_t{64} << 20), Algorithm::kPush);
}

/// Byte j of world rank r's movement input.
std::uint8_t byte_of(int r, std::size_t j) {
  return static_cast<std::uint8_t>((j * 131 + static_cast<std::size_t>(r) * 29 + 7) % 253);
}

void fill_bytes(std::byte* device, int rank, std::size_t bytes, std::size_t first = 0) {
  std::vector<std::uint8_t> host(bytes);
  for (std::size_t j = 0; j < bytes; ++j) host[j] = byte_of(rank, first + j);
  upload(device, host.data(), bytes);
}

const std::vector<std::size_t> kByteCounts = {1, 7, 16, 1000, 65536 + 3, 1 << 20};

TEST(CclAllGather, PullPushRingEveryCountInAndOutOfPlaceAndSubset) {
  for (iris::ccl::Communicator* comm : {&world(), halves()}) {
    if (!comm) continue;
    const int n = comm->size();
    const auto ranks = members(*comm);
    for (Algorithm algorithm : {Algorithm::kPull, Algorithm::kPush, Algorithm::kRing}) {
      for (std::size_t bytes : kByteCounts) {
        for (bool in_place : {false, true}) {
          std::byte* dst = arenas().b;
          std::byte* src = in_place ? dst + comm->index() * bytes : arenas().a;
          poison(dst, n * bytes);
          fill_bytes(src, context().rank(), bytes);
          comm->all_gather(dst, src, bytes, nullptr, {.algorithm = algorithm});
          const auto got = download(dst, n * bytes);
          for (std::size_t j = 0; j < n * bytes; ++j) {
            if (got[j] != std::byte{byte_of(ranks[j / bytes], j % bytes)}) {
              ADD_FAILURE() << "all_gather " << iris::ccl::to_string(algorithm) << " bytes "
                            << bytes << (in_place ? " in place" : "") << " team size " << n
                            << ": wrong byte " << j << " on rank " << context().rank();
              break;
            }
          }
        }
      }
    }
  }
}

TEST(CclAllGather, TypedStructsMoveAsBytes) {
  struct Pair {
    std::int16_t a;
    std::int8_t b;
  };
  auto& comm = world();
  const std::size_t count = 333;
  Pair* src = reinterpret_cast<Pair*>(arenas().a);
  Pair* dst = reinterpret_cast<Pair*>(arenas().b);
  std::vector<Pair> mine(count);
  for (std::size_t i = 0; i < count; ++i)
    mine[i] = {static_cast<std::int16_t>(i * 3 + context().rank()),
               static_cast<std::int8_t>(i % 100)};
  upload(src, mine.data(), count * sizeof(Pair));
  comm.all_gather(dst, src, count, nullptr);
  const auto got = download(dst, comm.size() * count * sizeof(Pair));
  const Pair* p = reinterpret_cast<const Pair*>(got.data());
  for (int k = 0; k < comm.size(); ++k)
    for (std::size_t i = 0; i < count; ++i)
      ASSERT_EQ(p[k * count + i].a, static_cast<std::int16_t>(i * 3 + k)) << k << " " << i;
}

TEST(CclAllGather, TwoDimensionalColumnBlocksInAndOutOfPlaceAndSubset) {
  struct Shape {
    std::size_t rows, row_bytes, src_pitch;  // dst pitch: team size * row_bytes + 32
  };
  // Ragged rows (not a multiple of 16 bytes), more rows than blocks, a single row.
  const Shape kShapes[] = {{1, 40, 40}, {300, 528, 600}, {7, 13, 13}, {1000, 256, 256}};
  for (iris::ccl::Communicator* comm : {&world(), halves()}) {
    if (!comm) continue;
    const int n = comm->size();
    const auto ranks = members(*comm);
    for (const Shape& shape : kShapes) {
      const std::size_t dst_pitch = n * shape.row_bytes + 32;
      for (bool in_place : {false, true}) {
        std::byte* dst = arenas().b;
        poison(dst, shape.rows * dst_pitch);
        const std::byte* src;
        std::size_t src_pitch;
        if (in_place) {
          // This member's block goes into its columns of dst first, row by row.
          std::vector<std::uint8_t> rows(shape.rows * dst_pitch);
          const auto got = download(dst, rows.size());
          std::memcpy(rows.data(), got.data(), rows.size());
          for (std::size_t r = 0; r < shape.rows; ++r)
            for (std::size_t j = 0; j < shape.row_bytes; ++j)
              rows[r * dst_pitch + comm->index() * shape.row_bytes + j] =
                  byte_of(context().rank(), r * shape.row_bytes + j);
          upload(dst, rows.data(), rows.size());
          src = dst + comm->index() * shape.row_bytes;
          src_pitch = dst_pitch;
        } else {
          std::vector<std::uint8_t> block(shape.rows * shape.src_pitch, 0);
          for (std::size_t r = 0; r < shape.rows; ++r)
            for (std::size_t j = 0; j < shape.row_bytes; ++j)
              block[r * shape.src_pitch + j] = byte_of(context().rank(), r * shape.row_bytes + j);
          upload(arenas().a, block.data(), block.size());
          src = arenas().a;
          src_pitch = shape.src_pitch;
        }
        comm->all_gather_2d_bytes(dst, dst_pitch, src, src_pitch, shape.rows, shape.row_bytes,
                                  nullptr);
        const auto got = download(dst, shape.rows * dst_pitch);
        const auto poisoned = got[dst_pitch - 1];  // past the last block: left alone
        for (std::size_t r = 0; r < shape.rows; ++r) {
          for (std::size_t j = 0; j < dst_pitch; ++j) {
            const std::size_t k = j / shape.row_bytes;
            const std::byte want =
                k < static_cast<std::size_t>(n)
                    ? std::byte{byte_of(ranks[k], r * shape.row_bytes + j % shape.row_bytes)}
                    : poisoned;
            if (got[r * dst_pitch + j] != want) {
              ADD_FAILURE() << "all_gather_2d rows " << shape.rows << " row_bytes "
                            << shape.row_bytes << (in_place ? " in place" : "") << " team size "
                            << n << ": wrong byte " << j << " of row " << r << " on rank "
                            << context().rank();
              r = shape.rows;
              break;
            }
          }
        }
      }
    }
  }
}

TEST(CclAllGather, TwoDimensionalArgumentsAreChecked) {
  auto& comm = world();
  std::byte* dst = arenas().b;
  const std::size_t n = comm.size();
  EXPECT_THROW(comm.all_gather_2d_bytes(dst, n * 64 - 1, arenas().a, 64, 4, 64, nullptr),
               iris::Error);  // dst_pitch too small
  EXPECT_THROW(comm.all_gather_2d_bytes(dst, n * 64, arenas().a, 63, 4, 64, nullptr),
               iris::Error);  // src_pitch too small
  EXPECT_THROW(comm.all_gather_2d_bytes(dst, n * 64, dst + 8, n * 64, 4, 64, nullptr),
               iris::Error);  // overlapping, not the in-place arrangement
  EXPECT_THROW(comm.all_gather_2d_bytes(dst, n * 64, arenas().a, 64, 4, 64, nullptr,
                                        {.algorithm = Algorithm::kPush}),
               iris::Error);  // it always pulls
}

// scatter reads only the root's src: a non-root's dst may overlap its own (unread) src, and
// the call runs on every member (a check on the others would fail there alone and leave the
// root waiting).
TEST(CclScatter, ANonRootsDstMayOverlapItsUnreadSrc) {
  auto& comm = world();
  if (comm.size() < 2) GTEST_SKIP() << "needs 2 or more ranks";
  const int n = comm.size();
  const int me = comm.index();
  constexpr std::size_t bytes = 4096;
  std::byte* src = arenas().a;
  fill_bytes(src, context().rank(), n * bytes);
  // Non-roots: dst is the first part of their own src, which nobody reads.
  std::byte* dst = me == 0 ? arenas().b : src;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  context().barrier();
  comm.scatter(dst, src, bytes, 0, nullptr);
  const auto got = download(dst, bytes);
  for (std::size_t j = 0; j < bytes; ++j)
    if (got[j] != std::byte{byte_of(comm.team().world_rank(0), me * bytes + j)}) {
      ADD_FAILURE() << "byte " << j;
      break;
    }
  context().barrier();
}

TEST(CclAllToAll, PullPushEveryCountAndSubset) {
  for (iris::ccl::Communicator* comm : {&world(), halves()}) {
    if (!comm) continue;
    const int n = comm->size();
    const auto ranks = members(*comm);
    for (Algorithm algorithm : {Algorithm::kPull, Algorithm::kPush}) {
      for (std::size_t bytes : kByteCounts) {
        std::byte* src = arenas().a;
        std::byte* dst = arenas().b;
        poison(dst, n * bytes);
        fill_bytes(src, context().rank(), n * bytes);
        comm->all_to_all(dst, src, bytes, nullptr, {.algorithm = algorithm});
        const auto got = download(dst, n * bytes);
        for (std::size_t j = 0; j < n * bytes; ++j) {
          const std::size_t k = j / bytes;
          if (got[j] != std::byte{byte_of(ranks[k], comm->index() * bytes + j % bytes)}) {
            ADD_FAILURE() << "all_to_all " << iris::ccl::to_string(algorithm) << " bytes " << bytes
                          << " team size " << n << ": wrong byte " << j << " on rank "
                          << context().rank();
            break;
          }
        }
      }
    }
  }
}

void check_all_to_allv(iris::ccl::Communicator& comm) {
  const int n = comm.size();
  const int me = comm.index();
  // Member s sends (s + 2 * d + 1) * 37 int32s to member d, packed in destination order.
  auto count_of = [](int s, int d) { return static_cast<std::int64_t>((s + 2 * d + 1) * 37); };
  auto* tables = static_cast<std::int64_t*>(context().allocate_bytes(4 * n * sizeof(std::int64_t)));
  std::vector<std::int64_t> send_counts(n), send_offsets(n), recv_counts(n), recv_offsets(n);
  std::int64_t at = 0, in = 0;
  for (int d = 0; d < n; ++d) {
    send_counts[d] = count_of(me, d);
    send_offsets[d] = at;
    at += send_counts[d];
    recv_counts[d] = count_of(d, me);
    recv_offsets[d] = in + 5;  // a gap before each part
    in += recv_counts[d] + 5;
  }
  upload(tables, send_counts.data(), n * 8);
  upload(tables + n, send_offsets.data(), n * 8);
  upload(tables + 2 * n, recv_counts.data(), n * 8);
  upload(tables + 3 * n, recv_offsets.data(), n * 8);
  auto* src = reinterpret_cast<std::int32_t*>(arenas().a);
  auto* dst = reinterpret_cast<std::int32_t*>(arenas().b);
  std::vector<std::int32_t> mine(at);
  for (std::int64_t i = 0; i < at; ++i)
    mine[i] = context().rank() * 1000003 + static_cast<std::int32_t>(i);
  upload(src, mine.data(), at * 4);
  poison(dst, (in + 5) * 4);
  comm.all_to_allv(dst, tables + 2 * n, tables + 3 * n, src, tables, tables + n, nullptr);
  const auto got_bytes = download(dst, (in + 5) * 4);
  const auto* got = reinterpret_cast<const std::int32_t*>(got_bytes.data());
  const auto ranks = members(comm);
  for (int s = 0; s < n; ++s) {
    std::int64_t offset = 0;  // where s packed its part for me
    for (int d = 0; d < me; ++d) offset += count_of(s, d);
    for (std::int64_t i = 0; i < recv_counts[s]; ++i) {
      const std::int32_t want = ranks[s] * 1000003 + static_cast<std::int32_t>(offset + i);
      if (got[recv_offsets[s] + i] != want) {
        ADD_FAILURE() << "all_to_allv: from member " << s << " element " << i << " got "
                      << got[recv_offsets[s] + i] << " want " << want;
        break;
      }
    }
    std::uint32_t gap;
    std::memcpy(&gap, &got[recv_offsets[s] - 1], 4);
    EXPECT_EQ(gap, 0xA7A7A7A7u) << "the gap before member " << s << "'s part was written";
  }
  context().free_bytes(tables);
}

TEST(CclAllToAllv, VariableCountsFromDeviceTables) {
  check_all_to_allv(world());
}

TEST(CclAllToAllv, StrictSubsetTeam) {
  if (iris::ccl::Communicator* half = halves()) check_all_to_allv(*half);
}

TEST(CclRooted, BroadcastGatherScatterEveryRootInAndOutOfPlace) {
  // Every call gets its own data (the salt), so that a call reading the wrong buffer cannot
  // pass on what an earlier call left there. In place means in place on every member.
  int salt = 0;
  for (iris::ccl::Communicator* comm : {&world(), halves()}) {
    if (!comm) continue;
    const int n = comm->size();
    const int me = comm->index();
    const auto ranks = members(*comm);
    for (std::size_t bytes : {std::size_t{1}, std::size_t{4099}, std::size_t{1} << 20}) {
      for (int root = 0; root < n; ++root) {
        for (bool in_place : {false, true}) {
          ++salt;
          // broadcast: dst == src on every member when in place
          {
            std::byte* dst = arenas().b;
            std::byte* src = in_place ? dst : arenas().a;
            poison(dst, bytes);
            fill_bytes(src, context().rank() + 1000 * salt, bytes);
            comm->broadcast(dst, src, bytes, root, nullptr);
            const auto got = download(dst, bytes);
            for (std::size_t j = 0; j < bytes; ++j)
              if (got[j] != std::byte{byte_of(ranks[root] + 1000 * salt, j)}) {
                ADD_FAILURE() << "broadcast root " << root << " bytes " << bytes
                              << (in_place ? " in place" : "") << " byte " << j;
                break;
              }
          }
          // gather: src == dst + index * bytes on every member when in place; out of place,
          // only the root names a dst (the push writes where the root says).
          for (Algorithm algorithm : {Algorithm::kPull, Algorithm::kPush}) {
            ++salt;
            std::byte* dst = arenas().b;
            std::byte* src = in_place ? dst + me * bytes : arenas().a;
            poison(dst, n * bytes);
            fill_bytes(src, context().rank() + 1000 * salt, bytes);
            comm->gather(in_place || me == root ? dst : nullptr, src, bytes, root, nullptr,
                         {.algorithm = algorithm});
            const auto got = download(dst, n * bytes);
            const char* how = algorithm == Algorithm::kPush ? " push" : " pull";
            if (me == root) {
              for (std::size_t j = 0; j < n * bytes; ++j)
                if (got[j] != std::byte{byte_of(ranks[j / bytes] + 1000 * salt, j % bytes)}) {
                  ADD_FAILURE() << "gather" << how << " root " << root << " bytes " << bytes
                                << (in_place ? " in place" : "") << " byte " << j;
                  break;
                }
            } else if (!in_place) {
              // A member's own dst is not the gather's: it stays as it was.
              for (std::size_t j = 0; j < n * bytes; ++j)
                if (got[j] != std::byte{kPoison}) {
                  ADD_FAILURE() << "gather" << how << " root " << root << " bytes " << bytes
                                << " wrote a non-root's dst at byte " << j;
                  break;
                }
            }
          }
          ++salt;
          // scatter: on the root, dst == src + root * bytes when in place
          {
            std::byte* src = arenas().a;
            std::byte* dst = in_place && me == root ? src + root * bytes : arenas().b;
            if (!(in_place && me == root)) poison(dst, bytes);
            fill_bytes(src, context().rank() + 1000 * salt, n * bytes);
            comm->scatter(dst, src, bytes, root, nullptr);
            const auto got = download(dst, bytes);
            for (std::size_t j = 0; j < bytes; ++j)
              if (got[j] != std::byte{byte_of(ranks[root] + 1000 * salt, me * bytes + j)}) {
                ADD_FAILURE() << "scatter root " << root << " bytes " << bytes
                              << (in_place ? " in place" : "") << " byte " << j;
                break;
              }
          }
        }
      }
    }
  }
}

// A ring in both directions at once (sends and receives on two streams: a send waits for its
// receiver, so one stream would deadlock the ring), call after call. The sender's size counts:
// a receive buffer larger than the message keeps its bytes past it, an empty send is a message
// too, and the two ends' block budgets need not agree (each end shapes its own grid).
TEST(CclSendRecv, RingOfSizesAndBudgetsThatNeedNotAgree) {
  auto& comm = world();
  const int n = comm.size();
  const int me = comm.index();
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  cudaStream_t send_stream, recv_stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&send_stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&recv_stream, cudaStreamNonBlocking), cudaSuccess);
  const int most = comm.max_blocks(iris::ccl::Collective::kSendRecv);
  struct Case {
    std::size_t sent, room;
    int send_blocks, recv_blocks;
  };
  const Case cases[] = {{1, 1, 0, 0},
                        {3333, 3333, 0, 0},
                        {std::size_t{2} << 20, std::size_t{2} << 20, 0, 0},
                        {std::size_t{2} << 20, std::size_t{2} << 20, 0, 0},
                        {1, 4096, 0, 0},
                        {3333, std::size_t{2} << 20, 1, most},
                        {std::size_t{2} << 20, (std::size_t{2} << 20) + 1000, most, 1},
                        {std::size_t{4} << 20, std::size_t{4} << 20, 1, 3},
                        {0, 512, 0, 0},
                        {0, 0, 0, 0},
                        {777, 777, 0, 0}};
  int round = 0;
  for (const Case& k : cases) {
    SCOPED_TRACE(testing::Message() << "sent " << k.sent << " into " << k.room << ", blocks "
                                    << k.send_blocks << "/" << k.recv_blocks);
    ++round;
    std::byte* src = arenas().a;
    std::byte* dst = arenas().b;
    poison(dst, k.room + 64);
    fill_bytes(src, context().rank() + round, k.sent);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    comm.send(src, k.sent, right, send_stream, {.max_blocks = k.send_blocks});
    comm.recv(dst, k.room, left, recv_stream, {.max_blocks = k.recv_blocks});
    ASSERT_EQ(cudaStreamSynchronize(send_stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(recv_stream), cudaSuccess);
    const auto got = download(dst, k.room + 64);
    for (std::size_t j = 0; j < got.size(); ++j) {
      const std::byte want = j < k.sent
                                 ? std::byte{byte_of(comm.team().world_rank(left) + round, j)}
                                 : std::byte{kPoison};
      if (got[j] != want) {
        ADD_FAILURE() << "byte " << j << (j < k.sent ? " of the message" : " past it");
        break;
      }
    }
    context().barrier();  // nobody refills src before its receiver is done
  }
  cudaStreamDestroy(send_stream);
  cudaStreamDestroy(recv_stream);
}

TEST(CclBarrier, OrdersWritesToPeers) {
  auto& comm = world();
  auto slots = context().full<int>(comm.size(), -1);
  for (int round = 0; round < 20; ++round) {
    std::vector<int> host(comm.size(), round);
    for (int k = 0; k < comm.size(); ++k)
      ASSERT_EQ(cudaMemcpy(slots.on(comm.team().world_rank(k)) + comm.index(), &round, sizeof(int),
                           cudaMemcpyHostToDevice),
                cudaSuccess);
    comm.barrier(nullptr);
    EXPECT_EQ(slots.to_host(), host) << "round " << round;
    comm.barrier(nullptr);
  }
}

}  // namespace
