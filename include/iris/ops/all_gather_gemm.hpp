// iris::ops::AllGatherGemm: the column-parallel layer. The activations A are sharded by rows
// across a team; every rank multiplies all of them by its own weights.
//
//   member r holds rows [r * M / W, (r + 1) * M / W) of A (its shard A_r, M / W x K, in the
//   symmetric heap: peers read it) and B (N x K, its weights, local); every member computes
//   C = A_full * B^T (M x N), A_full = [A_0; A_1; ...; A_{W-1}] (W = team.size; M % W == 0).
//
//   auto a = ctx.zeros<__nv_bfloat16>({m / world * k});               // symmetric: the shard
//   iris::ops::AllGatherGemm op(ctx);
//   op.initialize({.m = m, .n = n, .k = k, .a = a.data(), .b = w, .c = out});  // collective
//   op.run(stream);            // stream-ordered; when it completes here, out holds all of C
//
// Patterns (AllGatherPattern), each also in examples/17_all_gather_gemm:
//
//   bulk-synchronous   iris::ccl all_gather of the shards into a symmetric M x K buffer, then
//                      one GEMM of all of it
//   producer-consumer  (the decomposition of PyTorch's async tensor parallelism) the GEMM of
//                      the local shard starts at once on `stream`; a communication stream
//                      waits for a team barrier (every member's shard is ready), then pulls the
//                      peers' shards with the copy engines (cudaMemcpyAsync from the peers'
//                      heaps), one event per shard, in the order rank + 1, rank + 2, ... so
//                      that at each step every member pulls from a different peer; the GEMM of
//                      each shard's rows of C runs on `stream` as soon as its event fires
//
//          member 1 of 3:   stream:  GEMM(A_1)  wait e_2 GEMM(A_2)  wait e_0 GEMM(A_0)
//                           comm:    barrier  copy A_2 -> e_2  copy A_0 -> e_0  barrier
//
//   fused-mainloop     one persistent GEMM of all M rows over the gathered A, whose mainloop
//                      waits per tile: before the producer warp loads a tile's A rows, it waits
//                      (bounded) for the flag of every shard that holds them. On `stream`: count
//                      the run, a team barrier (every member's shard is ready), then the GEMM.
//                      On a communication stream forked after the barrier: the copy engines
//                      copy the local shard into the gathered A, then pull the peers' shards in
//                      the order rank + 1, rank + 2, ..., each copy followed by a copy of the
//                      run's number into that shard's flag; then a second team barrier. The
//                      GEMM visits its tiles shard by shard in the same order, the local
//                      shard's first. One launch instead of one per shard, and no event between
//                      them; the copy engines take no SMs, so the waiting GEMM cannot starve
//                      what it waits for.
//
//          member 1 of 3:   stream:  count  barrier  GEMM(tiles of A_1, A_2, A_0)
//                           comm:    copy A_1 -> f_1  copy A_2 -> f_2  copy A_0 -> f_0  barrier
//
// Numbers: each element of C is one GEMM's dot product over all of K (fp32 accumulation, one
// rounding to bf16), so every pattern gives the same bits, on every run.
//
// Completion: when run() completes on `stream`, all of C is in c, and every member has finished
// reading this rank's shard (the producer-consumer and fused-mainloop patterns end with a second
// team barrier; the all_gather ends with its exit exchange), so the caller may overwrite the
// shard for the next run. The shard must be complete on `stream` when run() is called.
//
// Contract: initialize() is collective over the world (same arguments and order on every member;
// it allocates the gathered A from the symmetric heap, and an iris::ccl communicator). run() is
// stream-ordered, makes no host synchronisation and no allocation, and can be captured in a CUDA
// graph and replayed (the communication stream forks from `stream` and joins it again); every
// member must run it the same number of times. Types: bf16 in, fp32 accumulate, bf16 out.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "iris/device/team.hpp"
#include "iris/host/context.hpp"
#include "iris/ops/gemm.hpp"

namespace iris::ops {

enum class AllGatherPattern {
  /// the measured table's choice (IRIS_OPS_TUNING's "all_gather_gemm" section; docs/ops.md);
  /// where it has none, the rule: bulk-synchronous where ranks share a GPU (measured: copies and
  /// GEMMs compete for one GPU); with one GPU per rank, producer-consumer when the team has more
  /// than one member and each shard has at least 128 rows (a GEMM of fewer rows leaves most SMs
  /// idle), else bulk-synchronous (not yet measured on several GPUs: docs/ops.md)
  kAuto,
  kBulkSynchronous,   ///< iris::ccl all_gather of A, then one GEMM
  kProducerConsumer,  ///< GEMM per shard, local first, while the copy engines pull the peers'
  /// one GEMM whose mainloop waits per tile for the shard flag of its A rows, while the copy
  /// engines pull the peers' shards and raise their flags (never chosen by kAuto's rule: not yet
  /// measured; a measured table may)
  kFusedMainloop,
};

/// "auto", "bulk_synchronous", "producer_consumer", "fused_mainloop".
std::string_view to_string(AllGatherPattern pattern) noexcept;

struct AllGatherGemmArguments {
  int m = 0;  ///< rows of A_full and of C: a multiple of team.size
  int n = 0;  ///< columns of C (rows of B)
  int k = 0;  ///< columns of A and B
  /// Symmetric (from ctx's heap): this rank's shard of A, (M / team.size) x K bf16, row-major,
  /// packed.
  const void* a = nullptr;
  const void* b = nullptr;   ///< N x K bf16, row-major, any device memory of this rank
  std::int64_t ldb = 0;      ///< 0: k
  void* c = nullptr;         ///< M x N bf16, row-major, any device memory of this rank
  std::int64_t ldc = 0;      ///< 0: n
  iris::team team{0, 0, 1};  ///< who takes part; size 0 means the whole world
  AllGatherPattern pattern = AllGatherPattern::kAuto;
};

namespace detail {
struct AllGatherState;
}

class AllGatherGemm {
 public:
  explicit AllGatherGemm(Context& ctx);
  ~AllGatherGemm();
  AllGatherGemm(AllGatherGemm&&) noexcept;
  AllGatherGemm& operator=(AllGatherGemm&&) noexcept;

  /// Whether `args` can run on `ctx`'s ranks; the message says why not. Local, no GPU needed.
  static Status can_implement(const Context& ctx, const AllGatherGemmArguments& args);

  /// Device bytes initialize() needs as `workspace` (0: the gathered A, M x K bf16, comes from
  /// the heap in initialize()).
  static std::size_t workspace_size(const AllGatherGemmArguments& args);

  /// The pattern kAuto resolves to for these arguments on this team (never kAuto).
  static AllGatherPattern choose(const Context& ctx, const AllGatherGemmArguments& args);

  /// Binds the arguments, resolves the pattern, allocates the gathered A (symmetric, zeroed),
  /// the fused-mainloop pattern's shard flags (symmetric), and the communication stream and
  /// events. Collective over the whole world of `ctx`. Throws
  /// iris::Error(kInvalidArgument) with can_implement's sentence.
  void initialize(const AllGatherGemmArguments& args, void* workspace = nullptr,
                  cudaStream_t stream = nullptr);

  /// Enqueues the whole operation on `stream`.
  void run(cudaStream_t stream = nullptr);

  /// The pattern initialize() chose (never kAuto).
  AllGatherPattern pattern() const;
  /// The gathered A (M x K, row-major; shard q at rows q * M / W): after a run, every member's
  /// shard, this rank's own included in the bulk-synchronous and fused-mainloop patterns
  /// (producer-consumer multiplies the local shard where it is).
  const void* gathered_a() const;

 private:
  std::unique_ptr<detail::AllGatherState> state_;
};

}  // namespace iris::ops
