// iris::ops::GemmAllReduceRmsNorm: a row-parallel layer followed by the residual add and RMSNorm,
// as one op on a team (the output projection of attention or the MLP's down projection, then the
// next layer's norm).
//
//   rank r holds A_r (M x K_r, its columns of the activations) and B_r (N x K_r, its columns of
//   the weights); on every member afterwards
//     residual_out = residual + sum over members q of A_q * B_q^T       (M x N, team order)
//     y            = RMSNorm(residual_out) * gamma                      (per row of N)
//   with y in the input type or in fp8 e4m3 (NormOutput, as AllReduceRmsNorm).
//
//   iris::ops::GemmAllReduceRmsNorm op(ctx);
//   op.initialize({.m = tokens, .n = hidden, .k = k_r, .a = a_r, .b = b_r, .residual = res,
//                  .gamma = gamma, .residual_out = res, .y = y});        // collective
//   op.run(stream);     // stream-ordered; when it completes, residual_out and y are here
//
// Composition: the op is iris::ops::Gemm (A_r * B_r^T, rounded once to the element type) into a
// symmetric M x N buffer the op owns, followed by iris::ops::AllReduceRmsNorm on that buffer, on
// one stream, so the whole layer is one graph-capturable call. The pattern is the norm's
// (AllReduceNormPattern):
//   bulk-synchronous  GEMM, iris::ccl all_reduce of the partial products, residual + RMSNorm
//                     kernel (three kernels: the unfused layer)
//   fused             GEMM, then AllReduceRmsNorm's fused kernel, which pulls every member's row
//                     of partial products, adds them and the residual and normalizes in registers
//                     (two kernels; the sum never goes through memory)
// The fused norm starts when the whole GEMM of every member is done (its barrier); starting
// each row block as soon as the members' tiles of that block are stored is not done yet.
//
// Numbers: the partial products are rounded to the element type once (as a GEMM followed by an
// all-reduce is); then AllReduceRmsNorm's numerics (fp32 sums in team order; the bulk pattern
// rounds the sum once more before the residual). Every member gets the same bits, run after run.
//
// Contract: initialize() is collective over the world (it allocates the symmetric buffer and
// AllReduceRmsNorm's communicator and channels): every rank, in the same order, with the same
// M, N, type and pattern. run() is stream-ordered, allocates nothing, never synchronises the
// host and can be captured in a CUDA graph; every member runs it the same number of times. A run
// overwrites the buffer only after every member finished reading the previous run's (the norm's
// completion guarantee), so runs and replays may follow each other without host synchronisation.
// residual_out may be residual (in place); y must not overlap the inputs.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "iris/device/team.hpp"
#include "iris/host/context.hpp"
#include "iris/ops/allreduce_rmsnorm.hpp"
#include "iris/ops/gemm.hpp"

namespace iris::ops {

struct GemmAllReduceRmsNormArguments {
  int m = 0;                       ///< rows: tokens, at least 1
  int n = 0;                       ///< columns: hidden, a multiple of 8
  int k = 0;                       ///< this rank's K shard, a multiple of 8
  DType type = DType::kBF16;       ///< kBF16 or kF16: A, B, residual, gamma, residual_out (and y)
  const void* a = nullptr;         ///< M x K_r, row-major, 16-byte aligned, any device memory
  std::int64_t lda = 0;            ///< 0: k
  const void* b = nullptr;         ///< N x K_r, row-major (weights), 16-byte aligned
  std::int64_t ldb = 0;            ///< 0: k
  const void* residual = nullptr;  ///< M x N, 16-byte aligned
  const void* gamma = nullptr;     ///< N, 16-byte aligned
  void* residual_out = nullptr;    ///< M x N, 16-byte aligned; may be residual
  void* y = nullptr;               ///< M x N of y_type, 16-byte aligned
  float eps = 1e-6f;               ///< positive
  NormOutput y_type = NormOutput::kInput;
  float y_scale = 1.f;       ///< fp8 only (see AllReduceRmsNormArguments::y_scale)
  iris::team team{0, 0, 1};  ///< who takes part; size 0 means the whole world
  AllReduceNormPattern pattern = AllReduceNormPattern::kAuto;
  /// The norm's blocks at most (AllReduceRmsNormArguments::max_blocks); 0: the norm's default,
  /// or with ranks sharing a GPU 64 divided among them (they spin while peers' GEMMs run).
  int max_blocks = 0;
};

namespace detail {
struct GemmAllReduceRmsNormState;
}

class GemmAllReduceRmsNorm {
 public:
  explicit GemmAllReduceRmsNorm(Context& ctx);
  /// Collective over the world once initialized (it frees symmetric memory).
  ~GemmAllReduceRmsNorm();
  GemmAllReduceRmsNorm(GemmAllReduceRmsNorm&&) noexcept;
  GemmAllReduceRmsNorm& operator=(GemmAllReduceRmsNorm&&) noexcept;

  /// Shapes, types, alignment and overlap (the GEMM's and the norm's rules), no GPU needed.
  static Status can_implement(const GemmAllReduceRmsNormArguments& args);
  /// The above, then the team (fits the world, contains this rank).
  static Status can_implement(const Context& ctx, const GemmAllReduceRmsNormArguments& args);

  /// 0: the symmetric M x N buffer comes from the heap in initialize().
  static std::size_t workspace_size(const GemmAllReduceRmsNormArguments& args);

  /// Binds the arguments, allocates the symmetric buffer and initializes the GEMM and the norm.
  /// Collective over the world. Throws iris::Error(kInvalidArgument) with can_implement's
  /// sentence.
  void initialize(const GemmAllReduceRmsNormArguments& args, void* workspace = nullptr,
                  cudaStream_t stream = nullptr);

  /// Enqueues the GEMM and the all-reduce + norm on `stream`.
  void run(cudaStream_t stream = nullptr);

  /// The pattern initialize() chose (never kAuto).
  AllReduceNormPattern pattern() const;
  /// Blocks of the fused norm kernel.
  int blocks() const;

 private:
  std::unique_ptr<detail::GemmAllReduceRmsNormState> state_;
};

}  // namespace iris::ops
