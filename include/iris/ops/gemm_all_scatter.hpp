// iris::ops::GemmAllScatter: C = A * B^T where every rank of a team computes one column block of
// C and every rank ends with all of C, in one of the overlap patterns of the Iris paper.
//
//   rank r holds A (M x K, the same on every rank) and B_r (N_r x K, its block of the weights);
//   it computes C[:, r*N_r : (r+1)*N_r] and scatters it, so that afterwards every rank's copy of
//   the symmetric C (M x N_r*team.size) is complete.
//
//   auto c = ctx.zeros<__nv_bfloat16>({m, n_local * world});        // symmetric
//   iris::ops::GemmAllScatter op(ctx);
//   op.initialize({.m = m, .n = n_local, .k = k, .a = a, .b = b_r, .c = c.data()});  // collective
//   op.run(stream);           // stream-ordered; when it completes here, all of C is here
//
// Patterns (AllScatterPattern), each also a numbered example (examples/10_* .. 12_*, 15_*):
//
//   bulk-synchronous   GEMM into C's own block  ->  all-gather of the blocks (iris::ccl)
//   fused sequential   the GEMM's epilogue stores each finished tile to every rank's C
//   producer-consumer  GEMM on gemm_sms SMs (stream 1) raises a local flag per tile;
//                      a communication kernel on the other SMs (stream 2) waits per tile and
//                      pushes it to every peer
//   workgroup-specialized  one persistent kernel: gemm_sms blocks compute and raise a local
//                      flag per tile, comm_blocks blocks of the same launch wait per tile and
//                      push it to every peer
//
//          rank 0            rank 1             every tile: data to each receiver, then
//        C[:, blk 0]  --->  C[:, blk 0]         flags[tile] += 1 on that receiver (release,
//        C[:, blk 1]  <---  C[:, blk 1]         system scope)
//
// Completion: run() ends with a small kernel on `stream` that waits (bounded) until every tile
// of every team member has arrived here, so work queued after run() on `stream` may read all of
// C. Per-tile arrival flags (tile_flags()) count runs: after the k-th run completes on this rank,
// each of its flags is >= k; a kernel may consume tiles as they arrive by waiting on them.
//
// Contract: initialize() is collective over the team (same arguments, shapes and order on every
// member; it allocates the op's flags from the symmetric heap). run() is stream-ordered, makes no
// host synchronisation and no allocation, and can be captured in a CUDA graph and replayed. A
// run writes into every member's C: do not start one while a peer still reads the previous
// result. Types (args.type): bf16 or fp16 for A, B and C alike, fp32 accumulate; every pattern
// runs both. fp32 operands are refused (no such kernel is compiled).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "iris/device/team.hpp"
#include "iris/host/context.hpp"
#include "iris/ops/gemm.hpp"
#include "iris/ops/trace.hpp"

namespace iris::ops {

enum class AllScatterPattern {
  /// The measured table's choice for (world size, M, N, K): the JSON file named by
  /// IRIS_OPS_TUNING, else the compiled-in table (docs/ops.md says what it holds and why), else
  /// fused sequential.
  kAuto,
  kBulkSynchronous,   ///< GEMM, then an all-gather of the column blocks
  kFusedSequential,   ///< the epilogue stores every tile to every rank
  kProducerConsumer,  ///< GEMM and a communication kernel on disjoint SMs, two streams
  /// One kernel whose blocks either compute tiles or send them as their flags rise.
  kWorkgroupSpecialized,
};

/// "auto", "bulk_synchronous", "fused_sequential", "producer_consumer",
/// "workgroup_specialized".
std::string_view to_string(AllScatterPattern pattern) noexcept;

struct GemmAllScatterArguments {
  int m = 0;  ///< rows of A and C
  int n = 0;  ///< columns of this rank's block of C (rows of B_r): the same on every member
  int k = 0;
  DType type = DType::kBF16;  ///< kBF16 or kF16: the elements of A, B and C
  const void* a = nullptr;    ///< M x K of `type`, row-major, any device memory of this rank
  std::int64_t lda = 0;       ///< 0: k
  const void* b = nullptr;    ///< N x K of `type` (this rank's weights), row-major
  std::int64_t ldb = 0;       ///< 0: k
  /// Symmetric (from ctx's heap): this rank's copy of C, M x (n * team.size), row-major, packed.
  void* c = nullptr;
  iris::team team{0, 0, 1};  ///< who takes part; size 0 means the whole world
  AllScatterPattern pattern = AllScatterPattern::kAuto;
  /// Producer-consumer: SMs of the GEMM (0: all but a slice for the communication kernel) and
  /// blocks of the communication kernel (0: the SMs left over, divided among the ranks that
  /// share this GPU, so that every rank's spinning blocks leave room for the GEMMs).
  /// Workgroup-specialized: blocks of the one kernel that compute (gemm_sms) and that send
  /// (comm_blocks), each rounded to whole 2-block clusters; 0: the blocks that can be resident
  /// at once, divided among the ranks sharing this GPU, with about 1/8 of them sending.
  int gemm_sms = 0;
  int comm_blocks = 0;
  /// Tracing (iris/ops/trace.hpp): per-tile events into this rank's tracer; null: off. The
  /// bulk-synchronous pattern records none (CUTLASS's TMA epilogue, then iris::ccl's
  /// all_gather_2d).
  Tracer* trace = nullptr;
};

namespace detail {
struct AllScatterState;
}

class GemmAllScatter {
 public:
  explicit GemmAllScatter(Context& ctx);
  ~GemmAllScatter();
  GemmAllScatter(GemmAllScatter&&) noexcept;
  GemmAllScatter& operator=(GemmAllScatter&&) noexcept;

  /// Whether `args` can run on `ctx`'s ranks; the message says why not. Local, no GPU needed.
  static Status can_implement(const Context& ctx, const GemmAllScatterArguments& args);

  /// Device bytes initialize() needs as `workspace` (0 today; kept for the adapter sequence).
  static std::size_t workspace_size(const GemmAllScatterArguments& args);

  /// Binds the arguments, resolves the pattern and allocates the per-tile flags (symmetric,
  /// zeroed; bulk-synchronous: also an iris::ccl::Communicator for the team). Collective over the
  /// whole world of `ctx` (every rank calls, in the same order), because symmetric allocation is.
  /// Throws iris::Error(kInvalidArgument) with can_implement's sentence.
  void initialize(const GemmAllScatterArguments& args, void* workspace = nullptr,
                  cudaStream_t stream = nullptr);

  /// Enqueues the whole operation on `stream` (producer-consumer also uses an internal stream,
  /// forked from and joined back to `stream` with events, so capture sees one graph).
  void run(cudaStream_t stream = nullptr);

  /// The pattern initialize() chose (never kAuto).
  AllScatterPattern pattern() const;
  /// This rank's arrival counters, one per tile of C: tile (i, j) of member q's block is
  /// tile_flags()[q * tiles_per_block() + i * tiles_n() + j].
  const std::uint64_t* tile_flags() const;
  int tiles_per_block() const;
  int tiles_n() const;
  /// The CTA tile: rows and columns of C per flag.
  int tile_m() const;
  int tile_n() const;

 private:
  std::unique_ptr<detail::AllScatterState> state_;
};

}  // namespace iris::ops
