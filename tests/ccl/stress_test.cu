// Many collectives back to back on one stream with no host synchronization (all_reduce,
// reduce_scatter, all_gather, broadcast, all_to_all, reduce, gather and scatter, every algorithm
// and operator), each with its own input and output, all verified at the end; a CUDA graph of
// mixed collectives replayed a thousand times, its inputs advancing inside the graph, every
// replay verified inside the graph, with eager collectives between replays; and two communicators
// running collectives at once on two streams (each on its own barrier channels and workspace),
// verified. Every rank draws the same random sequence (same seed), as every member must make the
// same calls.
#include <gtest/gtest.h>

#include <cstdint>
#include <iterator>
#include <random>
#include <vector>

#include "ccl/common.cuh"

namespace {

using namespace ccl_test;
using iris_test::context;

constexpr int kCalls = 10000;

enum class Kind {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kAllToAll,
  kReduce,
  kGather,
  kScatter
};
constexpr int kKinds = 8;

/// Parts of `count` elements in a call's input and output.
std::size_t parts_in(Kind kind, int n) {
  return kind == Kind::kReduceScatter || kind == Kind::kAllToAll || kind == Kind::kScatter ? n : 1;
}
std::size_t parts_out(Kind kind, int n) {
  return kind == Kind::kAllGather || kind == Kind::kAllToAll || kind == Kind::kGather ? n : 1;
}

struct Call {
  Kind kind;
  Algorithm algorithm;
  ReduceOp op;
  std::size_t count;
  std::size_t in;  // element offsets into the arenas
  std::size_t out;
  int root;
};

__host__ __device__ int value(int rank, std::size_t call, std::size_t i) {
  return static_cast<int>((i * 5 + call * 11 + static_cast<std::size_t>(rank) * 3) % 97) - 48;
}

TEST(CclStress, TenThousandRandomCollectivesBackToBackNoHostSync) {
  iris::Context& ctx = context();
  auto& comm = world();
  const int n = comm.size();
  std::mt19937_64 rng(12345);
  std::vector<Call> calls;
  std::size_t in = 0, out = 0;
  for (int c = 0; c < kCalls; ++c) {
    Call call{};
    call.kind = static_cast<Kind>(rng() % kKinds);
    // Mostly small (the packet and latency paths), one in 50 up to 20000 elements (several
    // blocks, the bandwidth paths); every call has its own input and output.
    call.count = 1 + rng() % (c % 50 == 0 ? 20000 : 700);
    call.op = kOps[rng() % std::size(kOps)];
    const Algorithm ar[] = {Algorithm::kOneShot, Algorithm::kOneShotPull, Algorithm::kOneShotPush,
                            Algorithm::kTwoShot, Algorithm::kTwoShotPackets};
    const Algorithm ag[] = {Algorithm::kPull, Algorithm::kPush, Algorithm::kRing};
    const Algorithm rs[] = {Algorithm::kPull, Algorithm::kRing};
    // all_to_all, gather, reduce
    const Algorithm pull_push[] = {Algorithm::kPull, Algorithm::kPush};
    call.algorithm =
        call.kind == Kind::kAllReduce       ? ar[rng() % 5]
        : call.kind == Kind::kAllGather     ? ag[rng() % 3]
        : call.kind == Kind::kReduceScatter ? rs[rng() % 2]
        : call.kind == Kind::kAllToAll || call.kind == Kind::kGather || call.kind == Kind::kReduce
            ? pull_push[rng() % 2]
            : Algorithm::kAuto;
    call.root = static_cast<int>(rng() % n);
    call.in = in;
    call.out = out;
    in += (parts_in(call.kind, n) * call.count + 3) / 4 * 4;  // keep 16-byte alignment
    out += (parts_out(call.kind, n) * call.count + 3) / 4 * 4;
    calls.push_back(call);
  }
  ASSERT_EQ(calls.size(), static_cast<std::size_t>(kCalls));
  // The same sizes on every rank (the same draws and team size): the allocations line up.
  auto* a = static_cast<std::int32_t*>(ctx.allocate_bytes((in + 4) * sizeof(std::int32_t)));
  auto* b = static_cast<std::int32_t*>(ctx.allocate_bytes((out + 4) * sizeof(std::int32_t)));
  // Inputs of every call, then the outputs poisoned, then every call without a host sync.
  std::vector<std::int32_t> host(in);
  for (std::size_t c = 0; c < calls.size(); ++c) {
    const Call& call = calls[c];
    for (std::size_t i = 0; i < parts_in(call.kind, n) * call.count; ++i)
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
        comm.reduce_scatter(dst, src, call.count, call.op, nullptr, {.algorithm = call.algorithm});
        break;
      case Kind::kAllGather:
        comm.all_gather(dst, src, call.count, nullptr, {.algorithm = call.algorithm});
        break;
      case Kind::kBroadcast:
        comm.broadcast(dst, src, call.count, call.root, nullptr);
        break;
      case Kind::kAllToAll:
        comm.all_to_all(dst, src, call.count, nullptr, {.algorithm = call.algorithm});
        break;
      case Kind::kReduce:
        comm.reduce(dst, src, call.count, call.op, call.root, nullptr,
                    {.algorithm = call.algorithm});
        break;
      case Kind::kGather:
        comm.gather(dst, src, call.count, call.root, nullptr, {.algorithm = call.algorithm});
        break;
      case Kind::kScatter:
        comm.scatter(dst, src, call.count, call.root, nullptr);
        break;
    }
  }
  const auto got_bytes = download(b, out * sizeof(std::int32_t));
  const auto* got = reinterpret_cast<const std::int32_t*>(got_bytes.data());
  const auto ranks = members(comm);
  std::size_t wrong_calls = 0;
  for (std::size_t c = 0; c < calls.size(); ++c) {
    const Call& call = calls[c];
    // Integers reduce in 64 bits (types.hpp): a product of 8 values up to 48 fits, and wraps
    // to int32 as the element type does; avg is the sum over the team, truncated toward zero.
    auto reduce = [&](std::size_t i) {
      std::int64_t acc = value(ranks[0], c, i);
      for (int k = 1; k < n; ++k) {
        const std::int64_t v = value(ranks[k], c, i);
        acc = call.op == ReduceOp::kMin    ? std::min(acc, v)
              : call.op == ReduceOp::kMax  ? std::max(acc, v)
              : call.op == ReduceOp::kProd ? acc * v
                                           : acc + v;
      }
      if (call.op == ReduceOp::kAvg) acc /= n;
      return static_cast<std::int32_t>(static_cast<std::uint32_t>(acc));
    };
    // Rooted calls leave the others' dst alone (reduce, gather): only the root's is checked.
    const bool root_only = call.kind == Kind::kReduce || call.kind == Kind::kGather;
    if (root_only && comm.index() != call.root) continue;
    for (std::size_t j = 0; j < parts_out(call.kind, n) * call.count; ++j) {
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
        case Kind::kReduce:
          want = reduce(j);
          break;
        case Kind::kGather:
          want = value(ranks[j / call.count], c, j % call.count);
          break;
        case Kind::kScatter:
          want = value(ranks[call.root], c, comm.index() * call.count + j);
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

constexpr std::size_t kGraphCount = 3001;
constexpr std::size_t kGraphStride = 32768;  // elements between the graph's regions

/// What one replay of the graph must leave in b, checked inside the graph after its collectives:
/// the replay's number is `*replay` (the graph's last kernel advances it, with the inputs), and
/// every element that differs counts into `errors[0]`, the first one's replay, region and index
/// into errors[1..3].
struct GraphCheck {
  const std::int32_t* b;
  const int* replay;
  unsigned long long* errors;
  iris::team team;
  int index;  ///< this rank's member index
};

__device__ void expect(const GraphCheck& c, int region, std::size_t i, std::int32_t got,
                       std::int32_t want) {
  if (got == want) return;
  if (atomicAdd(c.errors, 1ull) == 0) {
    c.errors[1] = static_cast<unsigned long long>(*c.replay);
    c.errors[2] = static_cast<unsigned long long>(region);
    c.errors[3] = i;
  }
}

__global__ void check_replay(const __grid_constant__ GraphCheck c) {
  const int round = *c.replay;
  const int n = c.team.size;
  auto sum = [&](int region, std::size_t i) {
    std::int32_t s = 0;
    for (int k = 0; k < n; ++k) s += value(c.team.world_rank(k), region, i) + round;
    return s;
  };
  const std::size_t count = kGraphCount, stride = kGraphStride;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n * count;
       i += gridDim.x * blockDim.x) {
    if (i < count) {
      expect(c, 0, i, c.b[i], sum(0, i));               // one_shot
      expect(c, 1, i, c.b[stride + i], sum(1, i));      // two_shot
      expect(c, 6, i, c.b[6 * stride + i], sum(0, i));  // two_shot_packets
      expect(c, 7, i, c.b[7 * stride + i], sum(1, i));  // one_shot_push
      const std::size_t mine = static_cast<std::size_t>(c.index) * count + i;
      expect(c, 3, i, c.b[3 * stride + 8192 + i], sum(3, mine));  // reduce_scatter pull
      expect(c, 4, i, c.b[4 * stride + i], sum(4, mine));         // reduce_scatter ring
    }
    const int from = c.team.world_rank(static_cast<int>(i / count));
    const std::int32_t gathered = value(from, 2, i % count) + round;
    expect(c, 2, i, c.b[2 * stride + i], gathered);  // all_gather pull
    expect(c, 5, i, c.b[5 * stride + i], gathered);  // all_gather ring
  }
}

__global__ void advance(int* replay) {
  *replay += 1;
}

TEST(CclGraph, MixedCollectivesReplayedManyTimesEachVerified) {
  iris::Context& ctx = context();
  auto& comm = world();
  const int n = comm.size();
  constexpr std::size_t kCount = kGraphCount;
  constexpr std::size_t kStride = kGraphStride;
  auto* a = static_cast<std::int32_t*>(ctx.allocate_bytes(8 * kStride * sizeof(std::int32_t)));
  auto* b = static_cast<std::int32_t*>(ctx.allocate_bytes(8 * kStride * sizeof(std::int32_t)));
  // The eager calls between replays: their own input and output.
  auto* eager = static_cast<std::int32_t*>(ctx.allocate_bytes(2 * kStride * sizeof(std::int32_t)));
  // Inputs: region 0 (all_reduce one_shot and two_shot_packets), 1 (two_shot and one_shot_push),
  // 2 (all_gather, pull and ring), 3 (reduce_scatter pull), 4 (reduce_scatter ring). The push
  // and the ring share the staging: the push runs right before the ring, and after it in the
  // next replay.
  std::vector<std::int32_t> host(5 * kStride, 0);
  for (int r = 0; r < 5; ++r)
    for (std::size_t i = 0; i < kStride; ++i) host[r * kStride + i] = value(ctx.rank(), r, i);
  upload(a, host.data(), host.size() * sizeof(std::int32_t));
  int* replay = nullptr;
  unsigned long long* errors = nullptr;
  ASSERT_EQ(cudaMalloc(&replay, sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&errors, 4 * sizeof(unsigned long long)), cudaSuccess);
  ASSERT_EQ(cudaMemset(replay, 0, sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMemset(errors, 0, 4 * sizeof(unsigned long long)), cudaSuccess);
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
  comm.all_reduce(b + 6 * kStride, a, kCount, ReduceOp::kSum, stream,
                  {.algorithm = Algorithm::kTwoShotPackets});
  comm.all_gather(b + 2 * kStride, a + 2 * kStride, kCount, stream);
  comm.reduce_scatter(b + 3 * kStride + 8192, a + 3 * kStride, kCount, ReduceOp::kSum, stream);
  comm.all_gather(b + 5 * kStride, a + 2 * kStride, kCount, stream,
                  {.algorithm = Algorithm::kRing});
  comm.all_reduce(b + 7 * kStride, a + kStride, kCount, ReduceOp::kSum, stream,
                  {.algorithm = Algorithm::kOneShotPush});
  comm.reduce_scatter(b + 4 * kStride, a + 4 * kStride, kCount, ReduceOp::kSum, stream,
                      {.algorithm = Algorithm::kRing});
  comm.barrier(stream);
  check_replay<<<64, 256, 0, stream>>>({b, replay, errors, comm.team(), comm.index()});
  add_one<<<64, 256, 0, stream>>>(a, 5 * kStride);
  advance<<<1, 1, 0, stream>>>(replay);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  constexpr int kReplays = 1000;
  const auto ranks = members(comm);
  for (int i = 0; i < kReplays; ++i) {
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    if (i % 100 != 99) continue;
    // Eager calls between replays, on the same stream and communicator: the team's epochs
    // they advance on the device are the ones the next replay starts from.
    const auto salt = static_cast<std::size_t>(i / 100);
    for (std::size_t j = 0; j < kCount; ++j) host[j] = value(ctx.rank(), 10 + salt, j);
    ASSERT_EQ(cudaMemcpyAsync(eager, host.data(), kCount * sizeof(std::int32_t),
                              cudaMemcpyHostToDevice, stream),
              cudaSuccess);
    comm.all_reduce(eager + kStride, eager, kCount, ReduceOp::kSum, stream,
                    {.algorithm = i % 200 == 99 ? Algorithm::kOneShot : Algorithm::kTwoShot});
    comm.all_gather(eager + kStride + kCount, eager, kCount / n, stream);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    const auto got_bytes =
        download(eager + kStride, (kCount + n * (kCount / n)) * sizeof(std::int32_t));
    const auto* got = reinterpret_cast<const std::int32_t*>(got_bytes.data());
    for (std::size_t j = 0; j < kCount; ++j) {
      std::int32_t want = 0;
      for (int r : ranks) want += value(r, 10 + salt, j);
      ASSERT_EQ(got[j], want) << "eager all_reduce after replay " << i << ", element " << j;
    }
    for (std::size_t j = 0; j < n * (kCount / n); ++j)
      ASSERT_EQ(got[kCount + j], value(ranks[j / (kCount / n)], 10 + salt, j % (kCount / n)))
          << "eager all_gather after replay " << i << ", element " << j;
  }
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);

  unsigned long long found[4];
  ASSERT_EQ(cudaMemcpy(found, errors, sizeof(found), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(found[0], 0u) << "wrong elements over the replays; the first in replay " << found[1]
                          << ", region " << found[2] << " (0 one_shot, 1 two_shot, 2 all_gather, "
                          << "3 reduce_scatter, 4 ring reduce_scatter, 5 ring all_gather, 6 "
                          << "two_shot_packets, 7 one_shot_push), element " << found[3];
  int replays = 0;
  ASSERT_EQ(cudaMemcpy(&replays, replay, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(replays, kReplays);
  cudaFree(errors);
  cudaFree(replay);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  ctx.barrier();
  ctx.free_bytes(eager);
  ctx.free_bytes(b);
  ctx.free_bytes(a);
}

/// Element i of the input that stream `s` of world rank r uses in round j (advanced in-stream
/// by add_one after each round).
int stream_value(int s, int r, std::size_t i) {
  return static_cast<int>((i * 3 + static_cast<std::size_t>(r) * 17 + s * 5) % 89) - 44;
}

TEST(CclStreams, TwoCommunicatorsRunCollectivesAtOnceOnTwoStreams) {
  iris::Context& ctx = context();
  auto& first = world();
  // A second communicator of the same team: its own workspace and barrier channels (made
  // collectively here, freed collectively at the end of the test).
  iris::ccl::Communicator second(ctx);
  const int n = first.size();
  constexpr int kRounds = 120;
  constexpr std::size_t kReduceCount = 3001;   // all_reduce: packets, pull, two-shot by turns
  constexpr std::size_t kGatherCount = 20011;  // all_gather, several blocks
  constexpr std::size_t kScatterCount = 2999;  // reduce_scatter on the second stream too
  auto* in1 = static_cast<std::int32_t*>(ctx.allocate_bytes(kReduceCount * sizeof(std::int32_t)));
  auto* in2 = static_cast<std::int32_t*>(
      ctx.allocate_bytes(n * kScatterCount * sizeof(std::int32_t) + kGatherCount * 4));
  const std::size_t out1_count = kRounds * kReduceCount;
  const std::size_t out2_count = kRounds * (n * kGatherCount + kScatterCount);
  auto* out1 = static_cast<std::int32_t*>(ctx.allocate_bytes(out1_count * sizeof(std::int32_t)));
  auto* out2 = static_cast<std::int32_t*>(ctx.allocate_bytes(out2_count * sizeof(std::int32_t)));
  std::int32_t* gather_in = in2 + n * kScatterCount;
  {
    std::vector<std::int32_t> h1(kReduceCount), h2(n * kScatterCount + kGatherCount);
    for (std::size_t i = 0; i < h1.size(); ++i) h1[i] = stream_value(1, ctx.rank(), i);
    for (std::size_t i = 0; i < h2.size(); ++i) h2[i] = stream_value(2, ctx.rank(), i);
    upload(in1, h1.data(), h1.size() * sizeof(std::int32_t));
    upload(in2, h2.data(), h2.size() * sizeof(std::int32_t));
  }
  poison(out1, out1_count * sizeof(std::int32_t));
  poison(out2, out2_count * sizeof(std::int32_t));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ctx.barrier();

  cudaStream_t s1, s2;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), cudaSuccess);
  const Algorithm kReduceAlgorithms[] = {Algorithm::kOneShot, Algorithm::kOneShotPull,
                                         Algorithm::kOneShotPush, Algorithm::kTwoShot,
                                         Algorithm::kTwoShotPackets};
  // Issued round by round, alternating streams, with no host synchronization: the two streams'
  // kernels overlap on the GPU. Each round advances its stream's inputs in-stream afterwards.
  for (int j = 0; j < kRounds; ++j) {
    first.all_reduce(out1 + j * kReduceCount, in1, kReduceCount, ReduceOp::kSum, s1,
                     {.algorithm = kReduceAlgorithms[j % 5]});
    add_one<<<8, 256, 0, s1>>>(in1, kReduceCount);
    std::int32_t* o2 = out2 + j * (n * kGatherCount + kScatterCount);
    const Algorithm gather[] = {Algorithm::kPull, Algorithm::kPush, Algorithm::kRing};
    second.all_gather(o2, gather_in, kGatherCount, s2, {.algorithm = gather[j % 3]});
    second.reduce_scatter(o2 + n * kGatherCount, in2, kScatterCount, ReduceOp::kSum, s2,
                          {.algorithm = j % 2 ? Algorithm::kRing : Algorithm::kPull});
    add_one<<<8, 256, 0, s2>>>(in2, n * kScatterCount + kGatherCount);
  }
  ASSERT_EQ(cudaStreamSynchronize(s1), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s2), cudaSuccess);

  const auto got1_bytes = download(out1, out1_count * sizeof(std::int32_t));
  const auto got2_bytes = download(out2, out2_count * sizeof(std::int32_t));
  const auto* got1 = reinterpret_cast<const std::int32_t*>(got1_bytes.data());
  const auto* got2 = reinterpret_cast<const std::int32_t*>(got2_bytes.data());
  const auto ranks = members(first);
  std::size_t wrong = 0;
  auto check = [&](std::int32_t got, std::int32_t want, const char* what, int j, std::size_t i) {
    if (got == want) return;
    if (wrong++ < 5)
      ADD_FAILURE() << what << " round " << j << " element " << i << " is " << got << ", want "
                    << want;
  };
  for (int j = 0; j < kRounds; ++j) {
    for (std::size_t i = 0; i < kReduceCount; ++i) {
      std::int32_t want = 0;
      for (int r : ranks) want += stream_value(1, r, i) + j;
      check(got1[j * kReduceCount + i], want, "all_reduce", j, i);
    }
    const std::int32_t* o2 = got2 + j * (n * kGatherCount + kScatterCount);
    for (std::size_t i = 0; i < n * kGatherCount; ++i)
      check(o2[i],
            stream_value(2, ranks[i / kGatherCount], n * kScatterCount + i % kGatherCount) + j,
            "all_gather", j, i);
    for (std::size_t i = 0; i < kScatterCount; ++i) {
      std::int32_t want = 0;
      for (int r : ranks) want += stream_value(2, r, first.index() * kScatterCount + i) + j;
      check(o2[n * kGatherCount + i], want, "reduce_scatter", j, i);
    }
  }
  EXPECT_EQ(wrong, 0u);
  cudaStreamDestroy(s1);
  cudaStreamDestroy(s2);
  ctx.barrier();
  ctx.free_bytes(out2);
  ctx.free_bytes(out1);
  ctx.free_bytes(in2);
  ctx.free_bytes(in1);
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
  for (Algorithm alg : {Algorithm::kOneShot, Algorithm::kOneShotPull, Algorithm::kOneShotPush,
                        Algorithm::kTwoShot, Algorithm::kTwoShotPackets}) {
    if (!comm.cannot_run(Collective::kAllReduce, alg, kCount * sizeof(float)).empty()) continue;
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
