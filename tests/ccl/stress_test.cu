// Many collectives back to back on one stream with no host synchronization, each with its own
// input and output, all verified at the end; and a CUDA graph of mixed collectives replayed
// hundreds of times, its inputs advancing inside the graph, verified after the last replay.
// Every rank draws the same random sequence (same seed), as every member must make the same
// calls.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "ccl/common.cuh"

namespace {

using namespace ccl_test;
using iris_test::context;

constexpr std::size_t kArenaBytes = std::size_t{40} << 20;

enum class Kind { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kAllToAll };

struct Call {
  Kind kind;
  Algorithm algorithm;
  ReduceOp op;
  std::size_t count;
  std::size_t in;  // element offsets into the arenas
  std::size_t out;
  int root;
};

int value(int rank, std::size_t call, std::size_t i) {
  return static_cast<int>((i * 5 + call * 11 + static_cast<std::size_t>(rank) * 3) % 97) - 48;
}

TEST(CclStress, ThousandRandomCollectivesBackToBackNoHostSync) {
  iris::Context& ctx = context();
  auto& comm = world();
  const int n = comm.size();
  auto* a = static_cast<std::int32_t*>(ctx.allocate_bytes(kArenaBytes));
  auto* b = static_cast<std::int32_t*>(ctx.allocate_bytes(kArenaBytes));
  std::mt19937_64 rng(12345);
  std::vector<Call> calls;
  std::size_t in = 0, out = 0;
  const std::size_t limit = kArenaBytes / sizeof(std::int32_t);
  for (int c = 0; c < 1000; ++c) {
    Call call{};
    call.kind = static_cast<Kind>(rng() % 5);
    call.count = 1 + rng() % (c % 10 == 0 ? 20000 : 700);
    const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax};
    call.op = ops[rng() % 3];
    const Algorithm ar[] = {Algorithm::kOneShot, Algorithm::kOneShotPull, Algorithm::kTwoShot};
    call.algorithm = call.kind == Kind::kAllReduce ? ar[rng() % 3]
                     : call.kind == Kind::kAllGather
                         ? (rng() % 2 ? Algorithm::kPush : Algorithm::kPull)
                         : Algorithm::kAuto;
    call.root = static_cast<int>(rng() % n);
    const std::size_t parts_in =
        call.kind == Kind::kReduceScatter || call.kind == Kind::kAllToAll ? n : 1;
    const std::size_t parts_out =
        call.kind == Kind::kAllGather || call.kind == Kind::kAllToAll ? n : 1;
    if (in + parts_in * call.count + 4 > limit || out + parts_out * call.count + 4 > limit) break;
    call.in = in;
    call.out = out;
    in += (parts_in * call.count + 3) / 4 * 4;  // keep 16-byte alignment
    out += (parts_out * call.count + 3) / 4 * 4;
    calls.push_back(call);
  }
  // Inputs of every call, then the outputs poisoned, then every call without a host sync.
  std::vector<std::int32_t> host(in);
  for (std::size_t c = 0; c < calls.size(); ++c) {
    const Call& call = calls[c];
    const std::size_t parts =
        call.kind == Kind::kReduceScatter || call.kind == Kind::kAllToAll ? n : 1;
    for (std::size_t i = 0; i < parts * call.count; ++i)
      host[call.in + i] = value(ctx.rank(), c, i);
  }
  upload(a, host.data(), in * sizeof(std::int32_t));
  poison(b, out * sizeof(std::int32_t));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ctx.barrier();
  for (const Call& call : calls) {
    std::int32_t* src = a + call.in;
    std::int32_t* dst = b + call.out;
    switch (call.kind) {
      case Kind::kAllReduce:
        comm.all_reduce(dst, src, call.count, call.op, nullptr, {.algorithm = call.algorithm});
        break;
      case Kind::kReduceScatter:
        comm.reduce_scatter(dst, src, call.count, call.op, nullptr);
        break;
      case Kind::kAllGather:
        comm.all_gather(dst, src, call.count, nullptr, {.algorithm = call.algorithm});
        break;
      case Kind::kBroadcast:
        comm.broadcast(dst, src, call.count, call.root, nullptr);
        break;
      case Kind::kAllToAll:
        comm.all_to_all(dst, src, call.count, nullptr);
        break;
    }
  }
  const auto got_bytes = download(b, out * sizeof(std::int32_t));
  const auto* got = reinterpret_cast<const std::int32_t*>(got_bytes.data());
  const auto ranks = members(comm);
  std::size_t wrong_calls = 0;
  for (std::size_t c = 0; c < calls.size(); ++c) {
    const Call& call = calls[c];
    auto reduce = [&](std::size_t i) {
      std::int64_t acc = value(ranks[0], c, i);
      for (int k = 1; k < n; ++k) {
        const std::int64_t v = value(ranks[k], c, i);
        acc = call.op == ReduceOp::kSum   ? acc + v
              : call.op == ReduceOp::kMin ? std::min(acc, v)
                                          : std::max(acc, v);
      }
      return static_cast<std::int32_t>(acc);
    };
    const std::size_t parts = call.kind == Kind::kAllGather || call.kind == Kind::kAllToAll ? n : 1;
    for (std::size_t j = 0; j < parts * call.count; ++j) {
      std::int32_t want = 0;
      switch (call.kind) {
        case Kind::kAllReduce:
          want = reduce(j);
          break;
        case Kind::kReduceScatter:
          want = reduce(comm.index() * call.count + j);
          break;
        case Kind::kAllGather:
          want = value(ranks[j / call.count], c, j % call.count);
          break;
        case Kind::kBroadcast:
          want = value(ranks[call.root], c, j);
          break;
        case Kind::kAllToAll:
          want = value(ranks[j / call.count], c, comm.index() * call.count + j % call.count);
          break;
      }
      if (got[call.out + j] != want) {
        if (wrong_calls++ < 5)
          ADD_FAILURE() << "call " << c << " (kind " << static_cast<int>(call.kind) << ", "
                        << iris::ccl::to_string(call.algorithm) << ", count " << call.count
                        << "): element " << j << " is " << got[call.out + j] << ", want " << want;
        break;
      }
    }
  }
  EXPECT_EQ(wrong_calls, 0u) << "of " << calls.size() << " calls";
  ctx.barrier();
  ctx.free_bytes(b);
  ctx.free_bytes(a);
}

__global__ void add_one(std::int32_t* p, std::size_t n) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    p[i] += 1;
}

TEST(CclGraph, MixedCollectivesReplayedManyTimes) {
  iris::Context& ctx = context();
  auto& comm = world();
  const int n = comm.size();
  constexpr std::size_t kCount = 3001;
  constexpr std::size_t kStride = 32768;  // elements between the regions below
  auto* a = static_cast<std::int32_t*>(ctx.allocate_bytes(8 * kStride * sizeof(std::int32_t)));
  auto* b = static_cast<std::int32_t*>(ctx.allocate_bytes(8 * kStride * sizeof(std::int32_t)));
  // Inputs: region 0 (all_reduce one_shot), 1 (two_shot), 2 (all_gather), 3 (reduce_scatter).
  std::vector<std::int32_t> host(4 * kStride, 0);
  for (int r = 0; r < 4; ++r)
    for (std::size_t i = 0; i < kStride; ++i) host[r * kStride + i] = value(ctx.rank(), r, i);
  upload(a, host.data(), host.size() * sizeof(std::int32_t));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ctx.barrier();

  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(b, kPoison, 8 * kStride * sizeof(std::int32_t), stream), cudaSuccess);
  comm.all_reduce(b, a, kCount, ReduceOp::kSum, stream, {.algorithm = Algorithm::kOneShot});
  comm.all_reduce(b + kStride, a + kStride, kCount, ReduceOp::kSum, stream,
                  {.algorithm = Algorithm::kTwoShot});
  comm.all_gather(b + 2 * kStride, a + 2 * kStride, kCount, stream);
  comm.reduce_scatter(b + 3 * kStride + 8192, a + 3 * kStride, kCount, ReduceOp::kSum, stream);
  comm.barrier(stream);
  add_one<<<64, 256, 0, stream>>>(a, 4 * kStride);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  constexpr int kReplays = 500;
  for (int i = 0; i < kReplays; ++i) ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);

  const auto got_bytes = download(b, 8 * kStride * sizeof(std::int32_t));
  const auto* got = reinterpret_cast<const std::int32_t*>(got_bytes.data());
  const auto ranks = members(comm);
  const int last = kReplays - 1;  // the inputs the last replay saw were advanced this often
  auto sum = [&](int region, std::size_t i) {
    std::int32_t s = 0;
    for (int r : ranks) s += value(r, region, i) + last;
    return s;
  };
  for (std::size_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(got[i], sum(0, i)) << "one_shot element " << i;
    ASSERT_EQ(got[kStride + i], sum(1, i)) << "two_shot element " << i;
    ASSERT_EQ(got[3 * kStride + 8192 + i], sum(3, comm.index() * kCount + i))
        << "reduce_scatter " << i;
  }
  for (std::size_t j = 0; j < n * kCount; ++j)
    ASSERT_EQ(got[2 * kStride + j], value(ranks[j / kCount], 2, j % kCount) + last)
        << "all_gather " << j;
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  ctx.barrier();
  ctx.free_bytes(b);
  ctx.free_bytes(a);
}

TEST(CclDeterminism, RandomFloatsGiveTheSameBitsOnEveryRankAndAlgorithm) {
  iris::Context& ctx = context();
  auto& comm = world();
  constexpr std::size_t kCount = 50021;
  auto* src = static_cast<float*>(ctx.allocate_bytes(kCount * sizeof(float)));
  auto* dst = static_cast<float*>(ctx.allocate_bytes(kCount * sizeof(float)));
  std::mt19937 rng(777 + ctx.rank());
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> mine(kCount);
  for (float& v : mine) v = u(rng);
  upload(src, mine.data(), kCount * sizeof(float));
  std::vector<std::uint64_t> hashes;
  for (Algorithm alg : {Algorithm::kOneShot, Algorithm::kOneShotPull, Algorithm::kTwoShot}) {
    if (alg == Algorithm::kOneShot && kCount * sizeof(float) > comm.one_shot_capacity()) continue;
    poison(dst, kCount * sizeof(float));
    comm.all_reduce(dst, src, kCount, ReduceOp::kSum, nullptr, {.algorithm = alg});
    const auto got = download(dst, kCount * sizeof(float));
    std::uint64_t h = 1469598103934665603ull;
    for (std::byte x : got) h = (h ^ static_cast<std::uint8_t>(x)) * 1099511628211ull;
    hashes.push_back(h);
  }
  for (std::size_t i = 1; i < hashes.size(); ++i)
    EXPECT_EQ(hashes[i], hashes[0]) << "algorithm " << i << " differs from the first";
  std::vector<std::uint64_t> all(ctx.world_size());
  ctx.bootstrap().allgather(&hashes[0], all.data(), sizeof(std::uint64_t));
  for (int r = 0; r < ctx.world_size(); ++r) EXPECT_EQ(all[r], all[0]) << "rank " << r;
  ctx.barrier();
  ctx.free_bytes(dst);
  ctx.free_bytes(src);
}

}  // namespace
