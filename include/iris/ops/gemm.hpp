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
  /// Device bytes initialize() needs as `workspace` (0 for the persistent schedule, today).
  static std::size_t workspace_size(const GemmArguments& args);

  /// Binds `args` and `workspace` (at least workspace_size(args) bytes, device memory that lives
  /// as long as this object uses it). Throws iris::Error(kInvalidArgument) with can_implement's
  /// sentence when the arguments are not supported. May launch a small kernel on `stream` to
  /// clear the workspace; allocates nothing.
  void initialize(const GemmArguments& args, void* workspace = nullptr,
                  cudaStream_t stream = nullptr);

  /// Enqueues the GEMM on `stream`. No host synchronisation and no allocation: it can be
  /// captured in a CUDA graph, and the graph replays it with the bound arguments. Precondition:
  /// initialize() succeeded.
  void run(cudaStream_t stream = nullptr);

  const GemmArguments& arguments() const;

 private:
  std::unique_ptr<detail::GemmRunner> runner_;
  GemmArguments args_;
};

}  // namespace iris::ops
