// iris::ops::Gemm against cuBLAS (fp32 output, fp32 compute) on random data, over a grid of
// shapes with ragged edges in M, N and K, for every compiled type combination; plus leading
// dimensions wider than the matrix, a limited SM count, and CUDA-graph replays. The small-M
// configuration (stream-K scheduler) at decode shapes, forced and chosen by the shape rule, in
// its data-parallel, split-K and stream-K decompositions, over repeated runs and graph replays
// (its reduction locks must be cleared before every launch), with the caller's workspace and
// with the one Gemm allocates itself. The swap-AB configuration (D^T = B * A^T, written as a
// column-major D^T with leading dimension ldd) forced and chosen at token counts around its
// tile's 32 columns, ragged and long-K, repeated, replayed, with fewer SMs and wide leading
// dimensions.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "iris/host/error.hpp"
#include "iris/ops/gemm.hpp"

namespace {

using iris::ops::DType;
using iris::ops::GemmConfig;

#define CUBLAS_CHECK(expr) ASSERT_EQ((expr), CUBLAS_STATUS_SUCCESS) << #expr

__device__ float uniform(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return static_cast<float>(x >> 40) / static_cast<float>(1 << 24) * 2.0f - 1.0f;  // [-1, 1)
}

template <class T>
__global__ void fill(T* out, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                     std::uint64_t seed) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < rows * ld;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t col = i % ld;
    // Padding columns hold a huge value: if the kernel read them the results would show it.
    out[i] = static_cast<T>(col < cols ? uniform(seed, i) : 1e4f);
  }
}

template <class T>
float to_float(T v) {
  return static_cast<float>(v);
}

struct Shape {
  int m, n, k;
};

cudaDataType cuda_type(DType t) {
  return t == DType::kBF16 ? CUDA_R_16BF : t == DType::kF16 ? CUDA_R_16F : CUDA_R_32F;
}

template <class In>
void fill_matrix(In* p, std::int64_t rows, std::int64_t cols, std::int64_t ld, std::uint64_t seed) {
  fill<<<256, 256>>>(p, rows, cols, ld, seed);
}

/// How check_against_cublas binds and runs the GEMM beyond the shape.
struct Run {
  GemmConfig config = GemmConfig::kAuto;  ///< GemmArguments::config
  GemmConfig expect = GemmConfig::kAuto;  ///< the configuration that must run it; kAuto: any
  int runs = 1;                           ///< plain runs; D is cleared before the last one
  bool caller_workspace = true;           ///< false: a null workspace (Gemm allocates its own)
};

/// Runs our GEMM and cuBLAS on the same random data and compares element by element.
template <class In, class Out>
void check_against_cublas(DType in_type, DType out_type, Shape s, std::int64_t pad = 0,
                          int sm_count = 0, int graph_replays = 0, Run how = {}) {
  SCOPED_TRACE("M = " + std::to_string(s.m) + ", N = " + std::to_string(s.n) +
               ", K = " + std::to_string(s.k) + ", " + std::string(iris::ops::to_string(in_type)) +
               " -> " + std::string(iris::ops::to_string(out_type)) + ", pad " +
               std::to_string(pad) + ", sm_count " + std::to_string(sm_count) + ", config " +
               std::string(iris::ops::to_string(how.config)) + ", runs " +
               std::to_string(how.runs) + ", replays " + std::to_string(graph_replays) +
               (how.caller_workspace ? "" : ", own workspace"));
  const std::int64_t lda = s.k + pad, ldb = s.k + pad, ldd = s.n + pad;
  In *a = nullptr, *b = nullptr;
  Out* d = nullptr;
  float* ref = nullptr;
  ASSERT_EQ(cudaMalloc(&a, sizeof(In) * s.m * lda), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, sizeof(In) * s.n * ldb), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d, sizeof(Out) * s.m * ldd), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&ref, sizeof(float) * s.m * s.n), cudaSuccess);
  fill_matrix(a, s.m, s.k, lda, 1234 + s.m);
  fill_matrix(b, s.n, s.k, ldb, 5678 + s.n);
  ASSERT_EQ(cudaMemset(d, 0, sizeof(Out) * s.m * ldd), cudaSuccess);

  iris::ops::GemmArguments args;
  args.m = s.m;
  args.n = s.n;
  args.k = s.k;
  args.a_type = args.b_type = in_type;
  args.d_type = out_type;
  args.a = a;
  args.lda = lda;
  args.b = b;
  args.ldb = ldb;
  args.d = d;
  args.ldd = ldd;
  args.sm_count = sm_count;
  args.config = how.config;
  const auto status = iris::ops::Gemm::can_implement(args);
  ASSERT_TRUE(status) << status.message;
  const GemmConfig chosen = iris::ops::Gemm::select_config(args);
  if (how.expect != GemmConfig::kAuto) {
    ASSERT_EQ(chosen, how.expect) << "the shape rule chose " << iris::ops::to_string(chosen);
  }
  void* workspace = nullptr;
  const std::size_t workspace_bytes = iris::ops::Gemm::workspace_size(args);
  if (workspace_bytes && how.caller_workspace)
    ASSERT_EQ(cudaMalloc(&workspace, workspace_bytes), cudaSuccess);
  iris::ops::Gemm gemm;
  gemm.initialize(args, workspace);
  ASSERT_EQ(gemm.arguments().config, chosen);
  if (graph_replays == 0) {
    for (int i = 0; i < how.runs; ++i) {
      if (i == how.runs - 1 && how.runs > 1)  // the last run alone must produce the result
        ASSERT_EQ(cudaMemset(d, 0, sizeof(Out) * s.m * ldd), cudaSuccess);
      gemm.run();
    }
  } else {
    // The fills, the memset of D and initialize()'s clearing went on the legacy stream, which a
    // non-blocking stream does not wait for: finish them before the graph runs.
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    cudaStream_t stream;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    gemm.run(stream);
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int i = 0; i < graph_replays; ++i) {
      if (i == graph_replays - 1)  // the last replay alone must produce the result
        ASSERT_EQ(cudaMemsetAsync(d, 0, sizeof(Out) * s.m * ldd, stream), cudaSuccess);
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    }
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  cublasHandle_t handle;
  CUBLAS_CHECK(cublasCreate(&handle));
  const float alpha = 1.0f, beta = 0.0f;
  // Row-major D (M x N) = A (M x K) * B^T is column-major D^T = B^T(op T of K x N) * A.
  CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, s.n, s.m, s.k, &alpha, b,
                            cuda_type(in_type), static_cast<int>(ldb), a, cuda_type(in_type),
                            static_cast<int>(lda), &beta, ref, CUDA_R_32F, s.n, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cublasDestroy(handle);

  std::vector<Out> got(static_cast<std::size_t>(s.m) * ldd);
  std::vector<float> want(static_cast<std::size_t>(s.m) * s.n);
  ASSERT_EQ(cudaMemcpy(got.data(), d, sizeof(Out) * got.size(), cudaMemcpyDeviceToHost),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(want.data(), ref, sizeof(float) * want.size(), cudaMemcpyDeviceToHost),
            cudaSuccess);
  // Tolerance: the output type's rounding (relative) plus fp32 accumulation-order differences
  // (cuBLAS may split K), bounded by K * 2^-24 times the sum of |a*b| (about K / 3 here), with
  // margin: 1e-6 * K. A lost K block or a wrong tile is off by orders of magnitude more. (The
  // first H200 run used 2e-5 * sqrt(K), which three of 65536 fp32 results at K = 14336 exceeded
  // by 10%.)
  const float out_eps = out_type == DType::kF32    ? 0.0f
                        : out_type == DType::kBF16 ? 1.0f / 256
                                                   : 1.0f / 2048;
  const float accumulate = 1e-6f * static_cast<float>(s.k) + 1e-5f;
  std::size_t wrong = 0;
  std::string first;
  for (int i = 0; i < s.m; ++i) {
    for (int j = 0; j < s.n; ++j) {
      const float w = want[std::size_t(i) * s.n + j];
      const float g = to_float(got[std::size_t(i) * ldd + j]);
      if (!(std::fabs(g - w) <= out_eps * std::fabs(w) + accumulate)) {
        if (wrong++ == 0)
          first = "D(" + std::to_string(i) + ", " + std::to_string(j) + ") = " + std::to_string(g) +
                  ", cuBLAS " + std::to_string(w);
      }
    }
    // Padding columns of D are never written.
    for (std::int64_t j = s.n; j < ldd; ++j)
      if (to_float(got[std::size_t(i) * ldd + j]) != 0.0f && wrong++ == 0)
        first = "padding column " + std::to_string(j) + " of row " + std::to_string(i) + " written";
  }
  EXPECT_EQ(wrong, 0u) << "first: " << first;
  cudaFree(a);
  cudaFree(b);
  cudaFree(d);
  cudaFree(ref);
  if (workspace) cudaFree(workspace);
}

const Shape kShapes[] = {
    {128, 256, 64},     // exactly one tile
    {1, 8, 8},          // the smallest problem TMA allows
    {777, 1544, 520},   // ragged in M, N and K
    {1000, 264, 1032},  // N smaller than a tile, K not a multiple of the K tile
    {4096, 4096, 4096}, {2048, 6144, 1024}, {16, 4096, 14336},  // decode-like: tiny M, long K
};

TEST(Gemm, Bf16ToBf16MatchesCublas) {
  for (const Shape& s : kShapes)
    check_against_cublas<__nv_bfloat16, __nv_bfloat16>(DType::kBF16, DType::kBF16, s);
}

TEST(Gemm, Fp16ToFp16MatchesCublas) {
  for (const Shape& s : kShapes) check_against_cublas<__half, __half>(DType::kF16, DType::kF16, s);
}

TEST(Gemm, Bf16ToFp32MatchesCublas) {
  for (const Shape& s : kShapes)
    check_against_cublas<__nv_bfloat16, float>(DType::kBF16, DType::kF32, s);
}

TEST(Gemm, WideLeadingDimensionsAreRespected) {
  check_against_cublas<__nv_bfloat16, __nv_bfloat16>(DType::kBF16, DType::kBF16, {333, 520, 264},
                                                     /*pad=*/24);
  check_against_cublas<__nv_bfloat16, float>(DType::kBF16, DType::kF32, {333, 520, 264}, 8);
}

TEST(Gemm, FewerSmsGiveTheSameResult) {
  check_against_cublas<__nv_bfloat16, __nv_bfloat16>(DType::kBF16, DType::kBF16, {2048, 2048, 512},
                                                     0, /*sm_count=*/16);
}

TEST(Gemm, GraphReplaysGiveTheSameResult) {
  check_against_cublas<__nv_bfloat16, __nv_bfloat16>(DType::kBF16, DType::kBF16, {1024, 1536, 768},
                                                     0, 0, /*graph_replays=*/3);
}

// Decode shapes (N = 8192, K = 28672 / 8 ranks) and ragged ones through the small-M kernel. What
// CUTLASS's heuristic makes of them on 132 SMs: at N = 8192, 128 * ceil(M / 128) tiles, data-
// parallel; at N = 4096 and M <= 128, 64 tiles, stream-K (units cross tile boundaries); at
// N = 1024, 16 tiles of 64 K steps, split-K; 7 x 1544 x 520, 26 tiles of 9 K steps (the last
// ragged), stream-K; 128 x 264 x 28672, 5 tiles (6 with the cluster's), split-K.
const Shape kSmallMShapes[] = {
    {1, 8192, 3584},   {7, 8192, 3584},   {8, 8192, 3584},  {32, 8192, 3584},
    {128, 8192, 3584}, {200, 8192, 3584}, {32, 4096, 3584}, {1, 1024, 4096},
    {7, 1544, 520},    {128, 264, 28672}, {1, 8, 8},
};

TEST(Gemm, SmallMForcedMatchesCublas) {
  for (const Shape& s : kSmallMShapes)
    check_against_cublas<__nv_bfloat16, __nv_bfloat16>(
        DType::kBF16, DType::kBF16, s, 0, 0, 0,
        {.config = GemmConfig::kSmallM, .expect = GemmConfig::kSmallM, .runs = 3});
}

/// The device's SMs (0 where it cannot say).
int device_sms() {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
    return 0;
  return sms;
}

TEST(Gemm, SwapABThenSmallMAreChosenAtDecodeShapes) {
  if (std::getenv("IRIS_GEMM_CONFIG") != nullptr) GTEST_SKIP() << "IRIS_GEMM_CONFIG is set";
  if (device_sms() < 128)
    GTEST_SKIP() << "the decode shapes pick kSmallM on GPUs of 128 SMs or more";
  for (const int m : {1, 7, 8, 16, 32, 33, 64})  // M <= 64: the swap
    check_against_cublas<__nv_bfloat16, __nv_bfloat16>(DType::kBF16, DType::kBF16, {m, 8192, 3584},
                                                       0, 0, 0,
                                                       {.expect = GemmConfig::kSwapAB, .runs = 2});
  for (const int m : {65, 128, 200})
    check_against_cublas<__nv_bfloat16, __nv_bfloat16>(DType::kBF16, DType::kBF16, {m, 8192, 3584},
                                                       0, 0, 0,
                                                       {.expect = GemmConfig::kSmallM, .runs = 2});
  // 2 * ceil(M / 128) * 32 > SMs: the large tile.
  check_against_cublas<__nv_bfloat16, __nv_bfloat16>(DType::kBF16, DType::kBF16, {1024, 8192, 512},
                                                     0, 0, 0, {.expect = GemmConfig::kLargeTile});
}

TEST(Gemm, LargeTileForcedAtSmallMMatchesCublas) {
  check_against_cublas<__nv_bfloat16, __nv_bfloat16>(
      DType::kBF16, DType::kBF16, {8, 8192, 3584}, 0, 0, 0,
      {.config = GemmConfig::kLargeTile, .expect = GemmConfig::kLargeTile, .runs = 2});
}

TEST(Gemm, SmallMGraphReplaysGiveTheSameResult) {
  for (const Shape& s : {Shape{1, 8192, 3584}, Shape{32, 4096, 3584}, Shape{1, 1024, 4096}})
    check_against_cublas<__nv_bfloat16, __nv_bfloat16>(
        DType::kBF16, DType::kBF16, s, 0, 0, /*graph_replays=*/4,
        {.config = GemmConfig::kSmallM, .expect = GemmConfig::kSmallM});
}

TEST(Gemm, SmallMWithItsOwnWorkspaceAndFewerSms) {
  // 64 tiles on 20 SMs: two data-parallel waves, then 24 tiles stream-K; Gemm's own workspace
  // (null from the caller).
  check_against_cublas<__nv_bfloat16, __nv_bfloat16>(
      DType::kBF16, DType::kBF16, {32, 4096, 3584}, 0, /*sm_count=*/20, 0,
      {.config = GemmConfig::kSmallM, .runs = 3, .caller_workspace = false});
  check_against_cublas<__nv_bfloat16, __nv_bfloat16>(
      DType::kBF16, DType::kBF16, {128, 264, 28672}, 0, 0, 2,
      {.config = GemmConfig::kSmallM, .caller_workspace = false});
  check_against_cublas<__nv_bfloat16, __nv_bfloat16>(DType::kBF16, DType::kBF16, {33, 520, 264},
                                                     /*pad=*/24, 0, 0,
                                                     {.config = GemmConfig::kSmallM, .runs = 2});
}

TEST(Gemm, SmallMNeedsAWorkspaceOnlyWhereItSplitsTiles) {
  iris::ops::GemmArguments args;
  args.m = 32;
  args.k = 3584;
  args.config = GemmConfig::kSmallM;
  args.a = args.b = args.d = reinterpret_cast<void*>(std::uintptr_t{256});
  args.n = 8192;  // 128 tiles on >= 128 SMs: data-parallel, no partial tiles
  if (device_sms() >= 128) EXPECT_EQ(iris::ops::Gemm::workspace_size(args), 0u);
  args.n = 1024;  // 16 tiles: split K, partial tiles of 128 x 64 fp32 and their locks
  EXPECT_GE(iris::ops::Gemm::workspace_size(args), std::size_t{16} * 128 * 64 * 4);
}

// The swap-AB kernel on 132 SMs: at N = 8192, 64 tiles of 128 rows of B per 32 tokens, so
// stream-K up to M = 32 (64 tiles for 132 SMs) and data-parallel from M = 128 (256 tiles); at
// N = 4096 and M = 32, 32 tiles of 56 K steps, about four stream-K units each; at N = 1544, 13
// tiles (the last ragged), split over K; M = 7 and 200 leave a partial column tile (D's rows past
// M are never written); K = 28672, 448 K steps per tile.
const Shape kSwapABShapes[] = {
    {1, 8192, 3584},  {7, 8192, 3584},   {8, 8192, 3584},   {16, 8192, 3584},
    {32, 8192, 3584}, {64, 8192, 3584},  {128, 8192, 3584}, {200, 8192, 3584},
    {1, 8192, 28672}, {32, 8192, 28672}, {7, 1544, 520},    {16, 1544, 28672},
    {33, 4096, 3584}, {1, 8, 8},         {200, 1544, 3584}, {32, 4096, 3584},
};

TEST(Gemm, SwapABForcedMatchesCublas) {
  for (const Shape& s : kSwapABShapes)
    check_against_cublas<__nv_bfloat16, __nv_bfloat16>(
        DType::kBF16, DType::kBF16, s, 0, 0, 0,
        {.config = GemmConfig::kSwapAB, .expect = GemmConfig::kSwapAB, .runs = 3});
}

TEST(Gemm, SwapABGraphReplaysGiveTheSameResult) {
  for (const Shape& s : {Shape{1, 8192, 3584}, Shape{32, 4096, 3584}, Shape{7, 1544, 520}})
    check_against_cublas<__nv_bfloat16, __nv_bfloat16>(
        DType::kBF16, DType::kBF16, s, 0, 0, /*graph_replays=*/4,
        {.config = GemmConfig::kSwapAB, .expect = GemmConfig::kSwapAB});
}

TEST(Gemm, SwapABWithItsOwnWorkspaceFewerSmsAndWideLeadingDimensions) {
  // 64 tiles on 20 SMs: two data-parallel waves, then 24 tiles stream-K; Gemm's own workspace.
  check_against_cublas<__nv_bfloat16, __nv_bfloat16>(
      DType::kBF16, DType::kBF16, {16, 8192, 3584}, 0, /*sm_count=*/20, 0,
      {.config = GemmConfig::kSwapAB, .runs = 3, .caller_workspace = false});
  // ldd > N: D^T's columns are ldd apart and its rows N..ldd-1 (D's padding columns) untouched.
  check_against_cublas<__nv_bfloat16, __nv_bfloat16>(DType::kBF16, DType::kBF16, {7, 1544, 520},
                                                     /*pad=*/24, 0, 0,
                                                     {.config = GemmConfig::kSwapAB, .runs = 2});
  check_against_cublas<__nv_bfloat16, __nv_bfloat16>(
      DType::kBF16, DType::kBF16, {33, 520, 264}, /*pad=*/8, 0, /*graph_replays=*/2,
      {.config = GemmConfig::kSwapAB, .caller_workspace = false});
}

TEST(Gemm, SwapABSplitsKWhereItsTilesAreFewerThanHalfTheSms) {
  iris::ops::GemmArguments args;
  args.m = 8;
  args.n = 8192;  // 64 tiles
  args.k = 3584;
  args.config = GemmConfig::kSwapAB;
  args.a = args.b = args.d = reinterpret_cast<void*>(std::uintptr_t{256});
  if (device_sms() <= 128) GTEST_SKIP() << "64 tiles split only on more than 128 SMs";
  EXPECT_GT(iris::ops::Gemm::workspace_size(args), 0u);  // partial tiles and their locks
  args.sm_count = 64;  // one tile per SM: data-parallel, nothing to reduce
  EXPECT_EQ(iris::ops::Gemm::workspace_size(args), 0u);
}

}  // namespace
