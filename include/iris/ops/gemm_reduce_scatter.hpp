// iris::ops::GemmReduceScatter: the row-parallel layer. Every rank of a team holds one K shard of
// the operands, the product is the sum of the ranks' partial products, and every rank ends with
// its block of rows of that sum.
//
//   rank r holds A_r (M x K_r, its columns of A) and B_r (N x K_r, its columns of the weights);
//   C = sum over members q of A_q * B_q^T (M x N); member r ends with rows
//   [r * M / W, (r + 1) * M / W) of C in its c (W = team.size; M % W == 0).
//
//   auto c = ctx.zeros<__nv_bfloat16>({m / world * n});               // symmetric
//   iris::ops::GemmReduceScatter op(ctx);
//   op.initialize({.m = m, .n = n, .k = k_r, .a = a_r, .b = b_r, .c = c.data()});  // collective
//   op.run(stream);           // stream-ordered; when it completes here, c holds this rank's rows
//
// Patterns (ReduceScatterPattern), each also a numbered example (examples/14_*):
//
//   bulk-synchronous   GEMM of the partial product into a symmetric M x N buffer, then
//                      iris::ccl reduce_scatter of its row blocks into c
//   fused sequential   the GEMM's epilogue sends each finished partial tile to the owner of its
//                      rows, into this rank's slot of the owner's workspace, and raises the
//                      owner's flag for (tile, source); a reduction kernel on every rank waits
//                      for each of its tiles from every member and adds them in team order
//   producer-consumer  the GEMM stores every partial tile only into this rank's own M x N
//                      partial buffer and raises its own flag per tile; a reducer on a second
//                      stream, beside the GEMM, waits per tile of this rank's rows for every
//                      member's flag and pulls the members' partial tiles, adding them in team
//                      order (the epilogue sends nothing; the reducer's loads do)
//   workgroup-specialized  producer-consumer's GEMM and reducer in one persistent launch: its
//                      first blocks run the GEMM (tiles stored locally, own flag per tile), the
//                      others run the reducer's loop over this rank's rows; no second stream
//
//          rank 0 (rows 0..M/2)           rank 1 (rows M/2..M)
//        partial tile of rows 1  ----->  slot[0]        slot[q]: member q's partial rows,
//        slot[1]  <-----  partial tile of rows 0        flags[q][tile] += 1 (release, system)
//        c = slot[0] + slot[1]                          c = slot[0] + slot[1]
//
//     producer-consumer:  partials_0 (M x N, rank 0)     partials_1 (M x N, rank 1)
//        rank 0's reducer pulls rows 0..M/2 of both      rank 1's pulls rows M/2..M of both
//
//     workgroup-specialized, rank r's one launch:
//        blocks [0, G)      GEMM tiles -> partials_r, ready_r[t] += 1  (never wait)
//        blocks [G, G + S)  for t in my rows' tiles: wait ready_q[t] for every member q,
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
// by a bf16 reduce-scatter does), the members' partials are added in fp32 in team order and
// rounded once more, so every rank, run and pattern gets the same bits.
//
// Completion: when run() completes on `stream`, this rank's rows of C are in c. The fused,
// producer-consumer and workgroup-specialized patterns' per-tile flags (tile_flags()) count
// runs: after the k-th run on this rank every flag is >= k. A run does not start writing
// partials before every member has finished reading the previous run's (each says so with a
// flag when its reduction ends), so runs may follow each other, and graph replays of run(),
// without any host synchronisation.
//
// Contract: initialize() is collective over the world (same arguments and order on every member;
// it allocates the workspace and flags from the symmetric heap, and the bulk-synchronous
// pattern's iris::ccl::Communicator). run() is stream-ordered, makes no host synchronisation and
// no allocation, and can be captured in a CUDA graph and replayed; every member must run it the
// same number of times. Types: bf16 in, fp32 accumulate, bf16 out.
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

enum class ReduceScatterPattern {
  /// the measured table's choice (IRIS_OPS_TUNING's "gemm_reduce_scatter" section; docs/ops.md);
  /// where it has none, the rule: fused sequential when the row blocks are whole tiles, else
  /// bulk-synchronous (the rule never picks producer-consumer or workgroup-specialized: not
  /// measured yet)
  kAuto,
  kBulkSynchronous,  ///< GEMM into a symmetric buffer, then iris::ccl reduce_scatter
  kFusedSequential,  ///< the epilogue sends each tile to its rows' owner; a reduction kernel sums
  /// The GEMM stores its partial locally; a reducer beside it pulls and sums this rank's rows.
  kProducerConsumer,
  /// Producer-consumer's GEMM and reducer as the two roles of one launch's blocks; the same
  /// flags, reuse protocol, completion and bits.
  kWorkgroupSpecialized,
};

/// "auto", "bulk_synchronous", "fused_sequential", "producer_consumer",
/// "workgroup_specialized".
std::string_view to_string(ReduceScatterPattern pattern) noexcept;

struct GemmReduceScatterArguments {
  /// Rows of A_r and of C; a multiple of team.size (fused: M / team.size whole 128-row tiles).
  int m = 0;
  int n = 0;  ///< columns of C (rows of B_r)
  int k = 0;  ///< this rank's K shard (columns of A_r and B_r): the same on every member
  const void* a = nullptr;  ///< M x K_r bf16, row-major, any device memory of this rank
  std::int64_t lda = 0;     ///< 0: k
  const void* b = nullptr;  ///< N x K_r bf16, row-major
  std::int64_t ldb = 0;     ///< 0: k
  /// Symmetric (from ctx's heap): this rank's rows of C, (M / team.size) x N, row-major, packed.
  void* c = nullptr;
  iris::team team{0, 0, 1};  ///< who takes part; size 0 means the whole world
  ReduceScatterPattern pattern = ReduceScatterPattern::kAuto;
  /// Fused: blocks of the reduction kernel (0: twice the SMs with a GPU per rank; with ranks
  /// sharing a GPU, 16 divided among them, so that the spinning reducers leave SMs for the
  /// members' GEMMs). Producer-consumer: blocks of the reducer, which runs beside this rank's
  /// GEMM (0: 16 divided among the ranks sharing the GPU; at most what leaves the GEMMs SMs);
  /// the GEMM takes the SMs that the reducers of every rank on the GPU leave.
  /// Workgroup-specialized: the launch's reducer blocks, rounded up to whole clusters and at
  /// most this rank's budget less one cluster (0: the default above the enum); the GEMM blocks
  /// take the rest of the budget.
  int reduce_blocks = 0;
  /// Tracing (iris/ops/trace.hpp): the fused, producer-consumer and workgroup-specialized GEMMs'
  /// per-tile events (tile indices in the whole of C); null: off. The bulk-synchronous GEMM
  /// records none.
  Tracer* trace = nullptr;
};

namespace detail {
struct ReduceScatterState;
}

class GemmReduceScatter {
 public:
  explicit GemmReduceScatter(Context& ctx);
  ~GemmReduceScatter();
  GemmReduceScatter(GemmReduceScatter&&) noexcept;
  GemmReduceScatter& operator=(GemmReduceScatter&&) noexcept;

  /// Whether `args` can run on `ctx`'s ranks; the message says why not. Local, no GPU needed.
  static Status can_implement(const Context& ctx, const GemmReduceScatterArguments& args);

  /// Device bytes initialize() needs as `workspace` (0: the op's symmetric workspace, M x N bf16
  /// partials (every pattern) and the flags, comes from the heap in initialize()).
  static std::size_t workspace_size(const GemmReduceScatterArguments& args);

  /// Binds the arguments, resolves the pattern and allocates the symmetric workspace (zeroed).
  /// Collective over the whole world of `ctx`. Throws iris::Error(kInvalidArgument) with
  /// can_implement's sentence.
  void initialize(const GemmReduceScatterArguments& args, void* workspace = nullptr,
                  cudaStream_t stream = nullptr);

  /// Enqueues the whole operation on `stream`.
  void run(cudaStream_t stream = nullptr);

  /// The pattern initialize() chose (never kAuto).
  ReduceScatterPattern pattern() const;
  /// Fused: this rank's arrival counters, tile (i, j) of its rows from member q at
  /// tile_flags()[q * tiles_per_block() + i * tiles_n() + j]. Producer-consumer and
  /// workgroup-specialized: the counters of this rank's own GEMM, tile (i, j) of its whole
  /// M x N partial product at tile_flags()[i * tiles_n() + j] (ceil(M / tile_m()) x tiles_n()
  /// of them; the members' reducers read them). Bulk-synchronous: never raised.
  const std::uint64_t* tile_flags() const;
  /// Tiles of this rank's M / team.size rows of C.
  int tiles_per_block() const;
  int tiles_n() const;
  /// The CTA tile: rows and columns of C per flag.
  int tile_m() const;
  int tile_n() const;

 private:
  std::unique_ptr<detail::ReduceScatterState> state_;
};

}  // namespace iris::ops
