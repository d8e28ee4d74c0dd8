// iris::ops::GemmAllReduce: the row-parallel layer that every rank needs whole. Every rank of a
// team holds one K shard of the operands; the product is the sum of the ranks' partial products,
// and every rank ends with all of it.
//
//   rank r holds A_r (M x K_r, its columns of A) and B_r (N x K_r, its columns of the weights);
//   C = sum over members q of A_q * B_q^T (M x N), in team order; every member ends with the
//   same bits of C in its c.
//
//   auto c = ctx.zeros<__nv_bfloat16>({m * n});                        // symmetric
//   iris::ops::GemmAllReduce op(ctx);
//   op.initialize({.m = m, .n = n, .k = k_r, .a = a_r, .b = b_r, .c = c.data()});  // collective
//   op.run(stream);              // stream-ordered; when it completes here, c holds all of C
//
// Patterns (AllReducePattern), each also in examples/16_gemm_all_reduce:
//
//   bulk-synchronous   GEMM of the partial product into a symmetric M x N buffer, then
//                      iris::ccl all_reduce of it into c
//   one-shot           the GEMM's epilogue stores each finished partial tile into this rank's slot
//                      of every member's workspace ([W][M x N]) and raises each member's flag for
//                      (tile, source); a reduction kernel on every rank waits per tile for every
//                      member and adds all W partials in team order into c (each rank reduces
//                      the whole of C: one step, W - 1 copies of the product sent per rank)
//   two-shot           GemmReduceScatter's fused route (each tile to the owner of its rows, the
//                      owner adds the members' partials), then an iris::ccl all_gather of the
//                      reduced row blocks, in place in c (two steps, about 2 (W - 1) / W of the
//                      product sent per rank)
//   producer-consumer  the GEMM stores every partial tile only into this rank's own M x N
//                      partial buffer and raises its own flag per tile; a reducer on a second
//                      stream, beside the GEMM, waits per tile of C for every member's flag and
//                      pulls the members' partial tiles, adding them in team order into c (a
//                      one-shot pull: each rank reads W - 1 copies of the product; the epilogue
//                      sends nothing)
//   workgroup-specialized  producer-consumer's GEMM and reducer in one persistent launch: its
//                      first blocks run the GEMM (tiles stored locally, own flag per tile), the
//                      others run the reducer's loop over every tile of C; no second stream
//
//          one-shot, rank 0                        rank 1
//        partial tile t --> slot[0] here and on 1  partial tile t --> slot[1] here and on 0
//        c = slot[0] + slot[1] (every tile)        c = slot[0] + slot[1] (every tile)
//
//     workgroup-specialized, rank r's one launch:
//        blocks [0, G)      GEMM tiles -> partials_r, ready_r[t] += 1  (never wait)
//        blocks [G, G + S)  for every tile t of C: wait ready_q[t] for every member q,
//                           c[t] = partials_0[t] + ... + partials_{W-1}[t]   (pulled)
//
//   The workgroup-specialized block split: the blocks of the kernel that the GPU holds at once,
//   divided among the ranks sharing it (whole 2-block clusters), make this rank's budget; the
//   reducer takes reduce_blocks rounded up to whole clusters, at most the budget less one
//   cluster (0: about 16 SMs' worth of a whole GPU, at least one cluster, at most half), the
//   GEMM the rest. So the grids of all ranks on the GPU are resident at once: no GEMM block
//   waits for an SM held by reducer blocks that spin on the members' GEMMs.
//
// Numbers: partial products are rounded to bf16 once (the GEMM's output type, as a GEMM followed
// by a bf16 all-reduce does); the members' partials are added in fp32 in team order and rounded
// once more (what iris::ccl's all_reduce does), so every rank, run and pattern gets the same
// bits.
//
// Completion: when run() completes on `stream`, all of C is in this rank's c. A run does not
// start storing partials before every member has finished reading the previous run's (one-shot,
// producer-consumer and workgroup-specialized: each member says so with a flag when its
// reduction ends; two-shot:
// GemmReduceScatter's protocol, and the all_gather's exit exchange), so runs may follow each
// other, and graph replays of run(), without any host synchronisation.
//
// Contract: initialize() is collective over the world (same arguments and order on every member;
// it allocates workspace and flags from the symmetric heap, and iris::ccl communicators).
// run() is stream-ordered, makes no host synchronisation and no allocation, and can be captured
// in a CUDA graph and replayed; every member must run it the same number of times. Types: bf16
// in, fp32 accumulate, bf16 out.
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

enum class AllReducePattern {
  /// the measured table's choice (IRIS_OPS_TUNING's "gemm_all_reduce" section; docs/ops.md);
  /// where it has none, the rule: bulk-synchronous where ranks share a GPU (measured: the fused
  /// forms' reducers take the SMs the GEMMs need); with one GPU per rank, one-shot when its
  /// slots (W x M x N bf16) take at most 32 MiB (latency-bound sizes, and any size for W = 2,
  /// where both fused forms send the same bytes), else two-shot when M / W is whole 128-row
  /// tiles, else bulk-synchronous (a rule from byte counts, not yet measured on several GPUs:
  /// docs/ops.md); the rule never picks producer-consumer or workgroup-specialized (not
  /// measured yet)
  kAuto,
  kBulkSynchronous,  ///< GEMM into a symmetric buffer, then iris::ccl all_reduce
  kOneShot,  ///< the epilogue stores each tile to every member; each member reduces all tiles
  kTwoShot,  ///< GemmReduceScatter's fused route, then iris::ccl all_gather of the row blocks
  /// The GEMM stores its partial locally; a reducer beside it pulls and sums every tile of C.
  kProducerConsumer,
  /// Producer-consumer's GEMM and reducer as the two roles of one launch's blocks; the same
  /// flags, reuse protocol, completion and bits.
  kWorkgroupSpecialized,
};

/// "auto", "bulk_synchronous", "one_shot", "two_shot", "producer_consumer",
/// "workgroup_specialized".
std::string_view to_string(AllReducePattern pattern) noexcept;

struct GemmAllReduceArguments {
  int m = 0;  ///< rows of A_r and of C; two-shot: M / team.size whole 128-row tiles
  int n = 0;  ///< columns of C (rows of B_r)
  int k = 0;  ///< this rank's K shard (columns of A_r and B_r): the same on every member
  const void* a = nullptr;  ///< M x K_r bf16, row-major, any device memory of this rank
  std::int64_t lda = 0;     ///< 0: k
  const void* b = nullptr;  ///< N x K_r bf16, row-major
  std::int64_t ldb = 0;     ///< 0: k
  /// Symmetric (from ctx's heap): all of C, M x N bf16, row-major, packed.
  void* c = nullptr;
  iris::team team{0, 0, 1};  ///< who takes part; size 0 means the whole world
  AllReducePattern pattern = AllReducePattern::kAuto;
  /// One-shot and two-shot: blocks of the reduction kernel (0: twice the SMs with a GPU per
  /// rank; with ranks sharing a GPU, 16 divided among them, so that the spinning reducers leave
  /// SMs for the members' GEMMs). Producer-consumer: blocks of the reducer, which runs beside
  /// this rank's GEMM (0: 16 divided among the ranks sharing the GPU; at most what leaves the
  /// GEMMs SMs); the GEMM takes the SMs that the reducers of every rank on the GPU leave.
  /// Workgroup-specialized: the launch's reducer blocks, rounded up to whole clusters and at
  /// most this rank's budget less one cluster (0: the default above the enum); the GEMM blocks
  /// take the rest of the budget.
  int reduce_blocks = 0;
  /// Tracing (iris/ops/trace.hpp): the one-shot, two-shot, producer-consumer and
  /// workgroup-specialized GEMMs' per-tile events (tile indices in the whole of C); null: off.
  /// The bulk-synchronous GEMM records none.
  Tracer* trace = nullptr;
};

namespace detail {
struct AllReduceState;
}

class GemmAllReduce {
 public:
  explicit GemmAllReduce(Context& ctx);
  ~GemmAllReduce();
  GemmAllReduce(GemmAllReduce&&) noexcept;
  GemmAllReduce& operator=(GemmAllReduce&&) noexcept;

  /// Whether `args` can run on `ctx`'s ranks; the message says why not. Local, no GPU needed.
  static Status can_implement(const Context& ctx, const GemmAllReduceArguments& args);

  /// Device bytes initialize() needs as `workspace` (0: the op's symmetric workspace comes from
  /// the heap in initialize(): M x N bf16 partials for bulk-synchronous, two-shot,
  /// producer-consumer and workgroup-specialized, W x M x N for one-shot, and the flags).
  static std::size_t workspace_size(const GemmAllReduceArguments& args);

  /// The pattern kAuto resolves to for these arguments on this team (never kAuto).
  static AllReducePattern choose(const Context& ctx, const GemmAllReduceArguments& args);

  /// Binds the arguments, resolves the pattern and allocates the symmetric workspace (zeroed).
  /// Collective over the whole world of `ctx`. Throws iris::Error(kInvalidArgument) with
  /// can_implement's sentence.
  void initialize(const GemmAllReduceArguments& args, void* workspace = nullptr,
                  cudaStream_t stream = nullptr);

  /// Enqueues the whole operation on `stream`.
  void run(cudaStream_t stream = nullptr);

  /// The pattern initialize() chose (never kAuto).
  AllReducePattern pattern() const;
  /// One-shot: this rank's arrival counters, tile (i, j) of C from member q at
  /// tile_flags()[q * tiles() + i * tiles_n() + j]; two-shot: GemmReduceScatter's
  /// (GemmReduceScatter::tile_flags(), tiles of this rank's rows); producer-consumer and
  /// workgroup-specialized: the counters of this rank's own GEMM, tile (i, j) of its M x N
  /// partial product at tile_flags()[i * tiles_n() + j] (the members' reducers read them);
  /// bulk-synchronous: null.
  const std::uint64_t* tile_flags() const;
  /// Tiles per source in tile_flags().
  int tiles() const;
  int tiles_n() const;
  /// The CTA tile: rows and columns of C per flag.
  int tile_m() const;
  int tile_n() const;

 private:
  std::unique_ptr<detail::AllReduceState> state_;
};

}  // namespace iris::ops
