// iris::ops::Gemm: a Hopper GEMM (TMA loads, wgmma, warp-specialized persistent kernel, built from
// CUTLASS's collective builders) with the host sequence CUTLASS's adapters use.
//
//   iris::ops::GemmArguments args{.m = m, .n = n, .k = k, .a = a, .b = w, .d = out};
//   if (auto status = iris::ops::Gemm::can_implement(args); !status) fail(status.message);
//   iris::ops::Gemm gemm;
//   gemm.initialize(args, workspace, stream);   // workspace of Gemm::workspace_size(args) bytes
//   gemm.run(stream);                           // D = A * B^T, stream-ordered
//
// Layouts are the ones LLM layers use: A is row-major M x K (activations), B is row-major N x K
// (weights, the PyTorch nn.Linear layout), D is row-major M x N. Accumulation is fp32.
// Supported types (a_type = b_type -> d_type): bf16 -> bf16, fp16 -> fp16, bf16 -> fp32.
// Needs CUTLASS: link iris::ops (see docs/ops.md).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace iris::ops {

/// Element types of GEMM operands.
enum class DType { kBF16, kF16, kF32 };

/// "bf16", "fp16", "fp32".
std::string_view to_string(DType type) noexcept;
/// Bytes per element.
std::size_t size_of(DType type) noexcept;

/// What can_implement answers: ok, or one sentence that says what is wrong and what would work.
struct Status {
  bool ok = true;
  std::string message;  ///< empty when ok
  explicit operator bool() const { return ok; }
  static Status success() { return {}; }
  static Status failure(std::string sentence) { return {false, std::move(sentence)}; }
};

/// The compiled kernel configurations of the plain GEMM (docs/ops.md, "GEMM configurations").
enum class GemmConfig {
  kAuto,       ///< chosen by shape (the default): see GemmArguments::config
  kLargeTile,  ///< 128 x 256 x 64 tile, 2 x 1 clusters, persistent scheduler: large M
  kSmallM,     ///< 128 x 64 x 64 tile, 1 x 2 clusters, stream-K scheduler; bf16 -> bf16 only
  /// D^T = B * A^T (the weights as the 128-row side, the tokens as the 32-column side), stream-K
  /// scheduler: a few tokens (decode); bf16 -> bf16 only
  kSwapAB,
};

/// "auto", "large_tile", "small_m", "swap_ab" (the values IRIS_GEMM_CONFIG accepts).
std::string_view to_string(GemmConfig config) noexcept;

/// One GEMM D = A * B^T. Leading dimensions are in elements; 0 means packed (k, k, n).
struct GemmArguments {
  int m = 0;  ///< rows of A and D, any positive value
  int n = 0;  ///< rows of B, columns of D; a multiple of 16 bytes of d_type (8 bf16, 4 fp32)
  int k = 0;  ///< columns of A and B; a multiple of 8 (16 bytes of bf16/fp16: TMA's row rule)
  DType a_type = DType::kBF16;
  DType b_type = DType::kBF16;
  DType d_type = DType::kBF16;
  const void* a = nullptr;  ///< M x K, row-major, 16-byte aligned
  std::int64_t lda = 0;     ///< >= k, a multiple of 8
  const void* b = nullptr;  ///< N x K, row-major (weights), 16-byte aligned
  std::int64_t ldb = 0;     ///< >= k, a multiple of 8
  void* d = nullptr;        ///< M x N, row-major, 16-byte aligned
  std::int64_t ldd = 0;     ///< >= n, a multiple of 16 bytes of d_type
  /// SMs the persistent grid may occupy (0: all of the device's). Fewer leaves room for kernels
  /// on other streams (the producer-consumer pattern).
  int sm_count = 0;
  /// Which kernel configuration runs it. kAuto: the environment variable IRIS_GEMM_CONFIG
  /// (auto, large_tile, small_m, swap_ab) when set, else the shape rule, for bf16 -> bf16:
  /// kSwapAB when M <= 64 (the swapped tile's 32 columns hold the tokens, so B is read once
  /// up to 32 and twice above), else kSmallM when 2 * ceil(M / 128) * ceil(N / 256) <= SMs
  /// (sm_count, or the device's), i.e. when the large tile would leave at least half the SMs
  /// without a tile; other types, and larger M, kLargeTile. Forcing kSmallM or kSwapAB for other
  /// types is refused; IRIS_GEMM_CONFIG=small_m or swap_ab leaves them on kLargeTile.
  GemmConfig config = GemmConfig::kAuto;
};

namespace detail {
class GemmRunner;
}

class Gemm {
 public:
  Gemm();
  ~Gemm();
  Gemm(Gemm&&) noexcept;
  Gemm& operator=(Gemm&&) noexcept;

  /// Whether `args` describe a GEMM this class runs; the message says why not. Host only (no
  /// GPU needed), cheap; pointers are checked for alignment, not dereferenced.
  static Status can_implement(const GemmArguments& args);
  /// Device bytes initialize() needs as `workspace`: 0 for kLargeTile; for kSmallM and kSwapAB,
  /// what the stream-K scheduler's partial tiles and locks need (0 when it splits no tile).
  static std::size_t workspace_size(const GemmArguments& args);

  /// The configuration initialize() would choose for `args` (never kAuto). Host only; asks the
  /// device for its SM count when args.sm_count is 0. Throws iris::Error(kInvalidArgument) on
  /// a bad IRIS_GEMM_CONFIG.
  static GemmConfig select_config(const GemmArguments& args);

  /// Binds `args` and `workspace` (at least workspace_size(args) bytes of device memory that
  /// lives as long as this object uses it, 256-byte aligned as cudaMalloc's are). With a null
  /// `workspace` where workspace_size(args) is not 0, the object allocates one of that size and
  /// owns it; otherwise it allocates nothing. Throws iris::Error(kInvalidArgument) with
  /// can_implement's sentence when the arguments are not supported. Where it clears the
  /// workspace (a memset on `stream`), it waits for the clearing: run() may use any stream.
  void initialize(const GemmArguments& args, void* workspace = nullptr,
                  cudaStream_t stream = nullptr);

  /// Enqueues the GEMM on `stream` (for kSmallM and kSwapAB, after a memset of the stream-K
  /// locks where it splits tiles). No host synchronisation and no allocation: it can be
  /// captured in a CUDA graph, and the graph replays it with the bound arguments.
  /// Precondition: initialize() succeeded.
  void run(cudaStream_t stream = nullptr);

  /// The bound arguments, `config` resolved to the configuration that runs them.
  const GemmArguments& arguments() const;

 private:
  std::unique_ptr<detail::GemmRunner> runner_;
  GemmArguments args_;
};

}  // namespace iris::ops
