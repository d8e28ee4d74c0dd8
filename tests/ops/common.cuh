// Shared by the iris::ops multi-rank tests (with ops/can_implement.hpp): the GEMM ops' operand
// data (small integers, so that every product and sum is exact in bf16, or values whose sums
// round), their fills and arguments, the row-parallel ops' shared refusals, the element check of
// C against a host reference, hashes
// members compare, run copies, graph replays, arrival flags, trace counts, the norm ops' 16-bit
// and fp8 helpers, and the teams smaller than the world. The Context is mp/common.cuh's.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "iris/iris.hpp"
#include "iris/ops/trace.hpp"
#include "mp/common.cuh"
#include "ops/can_implement.hpp"

namespace ops_test {

using iris_test::context;

/// A GEMM C = A * B^T of M x N (what K counts, per rank or in all, is each test's).
struct Problem {
  int m, n, k;
};

// The 16-bit types of the norm ops: conversions, and the spacing of their values near 1.
inline float to_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
inline float to_float(__half v) {
  return __half2float(v);
}
template <class T>
__host__ __device__ T from_float(float v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rn(v);
  else
    return __float2half_rn(v);
}
/// Relative spacing of the type's values near 1 (one ulp): 2^-7 for bf16, 2^-10 for fp16.
template <class T>
constexpr double ulp() {
  return std::is_same_v<T, __nv_bfloat16> ? 1.0 / 128 : 1.0 / 1024;
}
/// The e4m3 code as a signed step count from zero (+0 and -0 are both 0): adjacent values differ
/// by one.
inline int fp8_order(std::uint8_t code) {
  const int magnitude = code & 0x7F;
  return (code & 0x80) ? -magnitude : magnitude;
}

// Exact data: |sum| <= K * world <= 256. K = 104, 40, 8 for 2, 4, 8 ranks (a multiple of 8,
// for 2 ranks neither below nor a multiple of the 64-deep k-tile).
inline int exact_k(int world) {
  return 256 / world - 24;
}

// Values in {-1, 0, 1}: with K * members <= 256 every partial and every sum is an integer of
// magnitude <= 256, which bf16 represents exactly. `seed` changes the data from run to run.
__host__ __device__ inline int a_value(int rank, int i, int k, int seed = 0) {
  return (i * 7 + k * 3 + rank * 5 + seed * 2) % 3 - 1;
}
__host__ __device__ inline int b_value(int rank, int j, int k, int seed = 0) {
  return (j * 5 + k + rank * 11 + seed) % 3 - 1;
}
// Values whose products and sums round in bf16 (multiples of 1/8 up to 1).
__host__ __device__ inline float a_rounding(int rank, int i, int k) {
  return static_cast<float>((i * 13 + k * 7 + rank * 3) % 17 - 8) / 8.0f;
}
__host__ __device__ inline float b_rounding(int rank, int j, int k) {
  return static_cast<float>((j * 11 + k * 5 + rank * 7) % 15 - 7) / 8.0f;
}

// The kernels are in an unnamed namespace: a __global__ function cannot be inline.
namespace {

/// Rows [row0, row0 + rows) of `rank`'s A (k columns) into a: a_value, or a_rounding.
__global__ void fill_a(__nv_bfloat16* a, int rank, int row0, int rows, int k, int seed,
                       bool rounding) {
  for (int x = blockIdx.x * blockDim.x + threadIdx.x; x < rows * k; x += gridDim.x * blockDim.x)
    a[x] = rounding ? __float2bfloat16_rn(a_rounding(rank, row0 + x / k, x % k))
                    : __int2bfloat16_rn(a_value(rank, row0 + x / k, x % k, seed));
}
/// `rank`'s B (n rows of k) into b: b_value, or b_rounding.
__global__ void fill_b(__nv_bfloat16* b, int rank, int n, int k, int seed, bool rounding) {
  for (int x = blockIdx.x * blockDim.x + threadIdx.x; x < n * k; x += gridDim.x * blockDim.x)
    b[x] = rounding ? __float2bfloat16_rn(b_rounding(rank, x / k, x % k))
                    : __int2bfloat16_rn(b_value(rank, x / k, x % k, seed));
}

/// Spins for about `ns` nanoseconds: makes one rank late.
__global__ void delay(unsigned ns) {
  const long long start = clock64();
  while (clock64() - start < static_cast<long long>(ns) * 2) {
  }
}

}  // namespace

/// One member's A (M x K) and B (N x K) in device memory, of `a_rank`'s and `b_rank`'s data.
struct Operands {
  __nv_bfloat16 *a = nullptr, *b = nullptr;
  Problem p;
  int a_rank, b_rank;
  Operands(const Problem& problem, int a_of, int b_of, bool rounding)
      : p(problem), a_rank(a_of), b_rank(b_of) {
    EXPECT_EQ(cudaMalloc(&a, sizeof(__nv_bfloat16) * p.m * p.k), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&b, sizeof(__nv_bfloat16) * p.n * p.k), cudaSuccess);
    refill(0, rounding, nullptr);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  /// This member's operands (both of `rank`'s data).
  Operands(const Problem& problem, int rank, bool rounding)
      : Operands(problem, rank, rank, rounding) {}
  Operands(const Operands&) = delete;
  Operands& operator=(const Operands&) = delete;
  /// Both again, of another seed, on `stream`.
  void refill(int seed, bool rounding, cudaStream_t stream) const {
    fill_a<<<128, 256, 0, stream>>>(a, a_rank, 0, p.m, p.k, seed, rounding);
    fill_b<<<128, 256, 0, stream>>>(b, b_rank, p.n, p.k, seed, rounding);
  }
  ~Operands() {
    cudaFree(a);
    cudaFree(b);
  }
};

/// The arguments of a GEMM op (GemmAllReduce, GemmReduceScatter, AllGatherGemm, GemmAllScatter)
/// for `p` and these tensors.
template <class Args, class Pattern>
Args gemm_arguments(const Problem& p, const void* a, const void* b, void* c, Pattern pattern,
                    iris::team team = {0, 0, 1}) {
  Args args;
  args.m = p.m;
  args.n = p.n;
  args.k = p.k;
  args.a = a;
  args.b = b;
  args.c = c;
  args.pattern = pattern;
  args.team = team;
  return args;
}

/// 1 MiB of this rank's own device memory, outside the heap (so not symmetric); freed at the end
/// of the scope.
struct LocalMemory {
  void* data = nullptr;
  LocalMemory() { EXPECT_EQ(cudaMalloc(&data, 1 << 20), cudaSuccess); }
  LocalMemory(const LocalMemory&) = delete;
  LocalMemory& operator=(const LocalMemory&) = delete;
  ~LocalMemory() { cudaFree(data); }
};

/// Where the GEMM ops' can_implement tests start: M x 256 x 64 with every tensor in `local`, so
/// that the symmetric one is not (each test then sets it).
template <class Args>
Args local_gemm_arguments(int m, const LocalMemory& local) {
  Args args;
  args.m = m;
  args.n = 256;
  args.k = 64;
  args.a = args.b = args.c = local.data;
  return args;
}

/// can_implement takes `args`; `op` is initialized with them and runs a pattern of its own (the
/// one asked, unless kAuto).
template <class Op, class Args>
void initialize_checked(iris::Context& ctx, Op& op, const Args& args) {
  using Pattern = decltype(args.pattern);
  ASSERT_TRUE(accepts(Op::can_implement(ctx, args)));
  op.initialize(args);
  EXPECT_NE(op.pattern(), Pattern::kAuto);
  if (args.pattern != Pattern::kAuto) EXPECT_EQ(op.pattern(), args.pattern);
}

/// What the row-parallel ops (GemmReduceScatter, GemmAllReduce) refuse in every pattern, with
/// args.pattern as given: a negative reduce_blocks and a bad K, with their sentences; initialize()
/// throws on the bad K, and run() before any initialize() throws. Local: no collective call.
template <class Op, class Args>
void expect_row_parallel_refusals(iris::Context& ctx, Args args) {
  args.reduce_blocks = -1;
  EXPECT_TRUE(refuses(Op::can_implement(ctx, args), "reduce_blocks"));
  args.reduce_blocks = 0;
  args.k = 60;
  EXPECT_TRUE(refuses(Op::can_implement(ctx, args), "K = 60"));
  Op op(ctx);
  EXPECT_THROW(op.initialize(args), iris::Error);
  EXPECT_THROW(op.run(), iris::Error);  // never initialized
}

/// Every element of this rank's C (bf16 or fp16) equals the reference; the first wrong one is
/// reported.
template <class T>
void expect_c(iris::Context& ctx, const std::vector<T>& got, const std::vector<float>& want,
              const std::string& when) {
  ASSERT_EQ(got.size(), want.size());
  std::size_t wrong = 0, first = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (to_float(got[i]) != want[i] && wrong++ == 0) first = i;
  }
  EXPECT_EQ(wrong, 0u) << "rank " << ctx.rank() << ", " << when << ": " << wrong
                       << " wrong elements; first at " << first << ": " << to_float(got[first])
                       << " instead of " << want[first];
}
template <class T>
void expect_c(iris::Context& ctx, const iris::Buffer<T>& c, const std::vector<float>& want,
              const std::string& when) {
  expect_c(ctx, c.to_host(), want, when);
}

/// FNV-1a over `bytes` bytes: members compare their results by it.
inline std::uint64_t hash_bytes(const void* data, std::size_t bytes) {
  std::uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

/// The norm ops' results as one hash: residual_out's bytes and y's.
inline std::uint64_t hash_results(const void* out, std::size_t out_bytes, const void* y,
                                  std::size_t y_bytes) {
  return hash_bytes(out, out_bytes) ^ (hash_bytes(y, y_bytes) * 31);
}

/// Every member of `team` has the same hash as this rank (`what`: what was hashed).
inline void expect_same_as_team(iris::Context& ctx, const iris::team& team, std::uint64_t mine,
                                const std::string& when, const std::string& what = "results") {
  std::vector<std::uint64_t> all(ctx.world_size());
  ctx.bootstrap().allgather(&mine, all.data(), sizeof(mine));
  for (int q = 0; q < team.size; ++q)
    EXPECT_EQ(all[team.world_rank(q)], mine)
        << when << ": rank " << ctx.rank() << "'s " << what << " and member " << q << "'s (rank "
        << team.world_rank(q) << ") differ";
}

/// A device copy of `count` elements per run, taken on the stream after each run and read back
/// when the runs are done.
template <class T>
struct RunCopies {
  T* data = nullptr;
  std::size_t count;
  RunCopies(std::size_t elements, int runs) : count(elements) {
    EXPECT_EQ(cudaMalloc(&data, sizeof(T) * count * runs), cudaSuccess);
  }
  RunCopies(const RunCopies&) = delete;
  RunCopies& operator=(const RunCopies&) = delete;
  ~RunCopies() { cudaFree(data); }
  cudaError_t keep(int run, const T* from, cudaStream_t stream) const {
    return cudaMemcpyAsync(data + run * count, from, sizeof(T) * count, cudaMemcpyDeviceToDevice,
                           stream);
  }
  std::vector<T> to_host(int run) const {
    std::vector<T> out(count);
    EXPECT_EQ(cudaMemcpy(out.data(), data + run * count, sizeof(T) * count, cudaMemcpyDeviceToHost),
              cudaSuccess);
    return out;
  }
};

/// Clears `bytes` at `data` on every rank, between two barriers: no peer still writes there
/// before, and none writes again before every rank has cleared.
inline void clear_everywhere(iris::Context& ctx, void* data, std::size_t bytes) {
  ctx.barrier();
  ASSERT_EQ(cudaMemset(data, 0, bytes), cudaSuccess);
  ctx.barrier();
}

/// Captures `record(stream)` (the work of one run) into a CUDA graph, launches it `replays`
/// times on `stream`, waits for it and checks the device errors.
template <class Record>
void replay_graph(iris::Context& ctx, cudaStream_t stream, int replays, Record&& record) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  record(stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int r = 0; r < replays; ++r) ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ctx.check_device_errors();
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

/// The `count` arrival flags at `flags` (device memory) all count `runs`.
inline void expect_flags(const std::uint64_t* flags, std::size_t count, std::uint64_t runs) {
  std::vector<std::uint64_t> host(count);
  ASSERT_EQ(
      cudaMemcpy(host.data(), flags, host.size() * sizeof(std::uint64_t), cudaMemcpyDeviceToHost),
      cudaSuccess);
  EXPECT_THAT(host, testing::Each(runs));
}

/// The fused GEMMs' trace: none dropped, every event well-formed and of one of `tiles` tiles,
/// and a gemm_tile, a store and a signal event per tile and run.
inline void expect_tile_events(const iris::ops::Tracer& tracer, int tiles, int runs) {
  EXPECT_EQ(tracer.dropped(), 0u);
  std::vector<int> per_kind(5, 0);
  for (const auto& e : tracer.events()) {
    EXPECT_LE(e.start_ns, e.end_ns);
    EXPECT_GE(e.tile, 0);
    EXPECT_LT(e.tile, tiles);
    ++per_kind[static_cast<int>(e.kind)];
  }
  using K = iris::ops::TraceKind;
  EXPECT_EQ(per_kind[int(K::kGemmTile)], tiles * runs);
  EXPECT_EQ(per_kind[int(K::kStore)], tiles * runs);
  EXPECT_EQ(per_kind[int(K::kSignal)], tiles * runs);
}

/// This rank's half of the world: ranks [0, W/2) or [W/2, W) (for 4 ranks and more).
inline iris::team half_of_the_world(const iris::Context& ctx) {
  const int half = ctx.world_size() / 2;
  return iris::team{ctx.rank() < half ? 0 : half, half, 1};
}
/// This rank and its neighbour: ranks {2p, 2p + 1} (for 4 ranks and more).
inline iris::team pair_of_neighbours(const iris::Context& ctx) {
  return iris::team{2 * (ctx.rank() / 2), 2, 1};
}

}  // namespace ops_test
