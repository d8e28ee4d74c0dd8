// iris::ops::AllReduceRmsNorm: the tail of a tensor-parallel row-parallel layer, all-reduce +
// residual add + RMSNorm, as one op on a team.
//
//   rank r holds x_r (tokens x hidden, its partial sums, on the symmetric heap), the residual
//   (tokens x hidden, the same on every member) and gamma (hidden). Afterwards, on every member:
//     residual_out = residual + (x_0 + x_1 + ... + x_{n-1})          (team order, fp32)
//     y[t][i]      = residual_out[t][i] * gamma[i] / sqrt(mean_i(residual_out[t][i]^2) + eps)
//
//   auto x = ctx.zeros<__nv_bfloat16>({tokens, hidden});        // symmetric: peers read it
//   iris::ops::AllReduceRmsNorm op(ctx);
//   op.initialize({.tokens = tokens, .hidden = hidden, .x = x.data(), .residual = res,
//                  .gamma = gamma, .residual_out = res, .y = y});   // collective
//   op.run(stream);       // stream-ordered; when it completes, residual_out and y are here
//
// Patterns (AllReduceNormPattern), compared by benchmarks/allreduce_rmsnorm.cu:
//
//   bulk-synchronous  iris::ccl all_reduce of x into a symmetric sum (rounded to the element
//                     type), then a residual + RMSNorm kernel: two kernels, an unfused layer
//   fused             one kernel; block b takes rows b, b + grid, ...:
//
//          rank 0 block b                      rank 1 block b
//          barrier (channel b) <-------------> barrier (channel b)   x of every member ready
//          row t: x_0[t] + x_1[t] (pulled)     row t: x_0[t] + x_1[t] (pulled)
//                 + residual[t] -> residual_out, sum of squares -> y   (registers, fp32)
//          arrive (channel b)  ------------->  (peers are done reading this rank's x)
//          ... y of the last row ...
//          wait (channel b)   <--------------
//
// Output type (NormOutput): y is bf16/fp16 (the input type), or fp8 e4m3 (__nv_fp8_e4m3, one byte)
// quantized with a per-tensor scale s given by the caller (y_scale):
//     y[t][i] = saturate_to_e4m3(residual_out[t][i] * gamma[i] / rms[t] / s)
// computed in fp32 (the quotient by s is IEEE-rounded), then converted to e4m3 with
// round-to-nearest-even and saturation: a finite value beyond +-448 (e4m3's largest) becomes
// +-448, never infinity or NaN (e4m3 has no infinity; only a NaN input gives NaN). residual_out
// stays in the input type either way. Both patterns support both outputs.
//
// Numerics: bf16 or fp16 in and out, fp32 arithmetic. residual_out is rounded to the element
// type once; the norm is computed from the rounded residual_out (what the next layer reads), and
// y is rounded once. The bulk-synchronous pattern rounds the sum of the x_r to the element type
// before adding the residual (as two separate kernels do), so the two patterns may differ by
// one rounding; each is deterministic.
//
// Determinism: every member adds the contributions in team order with the same code, so all
// members get bit-identical residual_out and y (when their residual and gamma are identical),
// run after run and replay after replay.
//
// Contract: initialize() is collective over the whole world (symmetric allocation is): every
// rank calls it, in the same order as its other allocations, with the same tokens, hidden,
// type and pattern; each names its own team (tensor-parallel groups of one size). It makes an
// iris::ccl::Communicator for the team and 64 barrier channels. run() is stream-ordered, makes
// no allocation and no host synchronisation, and can be captured in a CUDA graph and replayed.
// Every member of the team runs the op the same number of times, on one stream at a time; work
// queued before run() on `stream` (the writes of x) is what peers read. When run() completes on
// a rank, every member has finished reading that rank's x, so x may be overwritten. residual_out
// may be residual (in place); y must not overlap the inputs.
//
// Spinning: the fused kernel's blocks wait (bounded by the context's wait timeout) for the same
// block of every member, so the blocks of ranks sharing a GPU must be resident together: the
// grid is at most the communicator's SM budget (the GPU's SMs divided by the ranks on it, at
// most 64), with blocks small enough that two fit on an SM.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string_view>

#include "iris/device/team.hpp"
#include "iris/host/context.hpp"
#include "iris/ops/gemm.hpp"  // DType, Status

namespace iris::ops {

enum class AllReduceNormPattern {
  kAuto,             ///< the library's choice (docs/ops.md says what it is and why)
  kBulkSynchronous,  ///< iris::ccl all_reduce, then a residual + RMSNorm kernel
  kFused,            ///< one kernel: pull the peers' rows, add, normalize in registers
};

/// "auto", "bulk_synchronous", "fused".
std::string_view to_string(AllReduceNormPattern pattern) noexcept;

/// The element type of y.
enum class NormOutput {
  kInput,    ///< the input type (`type`: bf16 or fp16)
  kFp8E4M3,  ///< __nv_fp8_e4m3: saturate_to_e4m3(norm * gamma / y_scale) (see the top)
};

/// "input", "fp8_e4m3".
std::string_view to_string(NormOutput output) noexcept;

struct AllReduceRmsNormArguments {
  int tokens = 0;             ///< rows, at least 1
  int hidden = 0;             ///< columns, a multiple of 8 (16 bytes of bf16/fp16)
  DType type = DType::kBF16;  ///< kBF16 or kF16, of every tensor below
  /// Symmetric (from the Context's heap, the same allocation on every member): this rank's
  /// partial sums, tokens x hidden, row-major, packed.
  const void* x = nullptr;
  const void* residual = nullptr;  ///< tokens x hidden, any device memory, 16-byte aligned
  const void* gamma = nullptr;     ///< hidden, any device memory, 16-byte aligned
  void* residual_out = nullptr;    ///< tokens x hidden, 16-byte aligned; may be residual
  void* y = nullptr;               ///< tokens x hidden of y_type, 16-byte aligned
  float eps = 1e-6f;               ///< positive
  NormOutput y_type = NormOutput::kInput;
  /// fp8 only: the per-tensor scale s (y = saturate(norm * gamma / s)), positive and finite;
  /// must stay 1 for NormOutput::kInput.
  float y_scale = 1.f;
  iris::team team{0, 0, 1};  ///< who takes part; size 0 means the whole world
  AllReduceNormPattern pattern = AllReduceNormPattern::kAuto;
  /// Blocks of the fused kernel at most (0: the communicator's SM budget); never more than 64
  /// or than the tokens. A larger value than the default is the caller's promise that the
  /// blocks of all ranks on this GPU fit at once.
  int max_blocks = 0;
};

namespace detail {
struct AllReduceRmsNormState;
}

class AllReduceRmsNorm {
 public:
  explicit AllReduceRmsNorm(Context& ctx);
  /// Collective over the world once initialized (it frees symmetric memory): every rank, in the
  /// same order; it waits for this rank's device work first.
  ~AllReduceRmsNorm();
  AllReduceRmsNorm(AllReduceRmsNorm&&) noexcept;
  AllReduceRmsNorm& operator=(AllReduceRmsNorm&&) noexcept;

  /// Shapes, types, alignment and overlap only (no Context, no GPU): the message says what is
  /// wrong and what would work.
  static Status can_implement(const AllReduceRmsNormArguments& args);
  /// The above, then the team (fits the world, contains this rank) and x (inside the heap).
  static Status can_implement(const Context& ctx, const AllReduceRmsNormArguments& args);

  /// Device bytes initialize() needs as `workspace` (0: the op allocates its symmetric memory
  /// itself; kept for the adapter sequence).
  static std::size_t workspace_size(const AllReduceRmsNormArguments& args);

  /// Binds the arguments, resolves the pattern, makes the team's communicator and barrier
  /// channels (and, bulk-synchronous, the symmetric sum). Collective over the world (see the
  /// top). Throws iris::Error(kInvalidArgument) with can_implement's sentence.
  void initialize(const AllReduceRmsNormArguments& args, void* workspace = nullptr,
                  cudaStream_t stream = nullptr);

  /// Enqueues the operation on `stream`; see the contract at the top.
  void run(cudaStream_t stream = nullptr);

  /// The pattern initialize() chose (never kAuto).
  AllReduceNormPattern pattern() const;
  /// Blocks of the fused kernel for these arguments.
  int blocks() const;

 private:
  std::unique_ptr<detail::AllReduceRmsNormState> state_;
};

}  // namespace iris::ops
