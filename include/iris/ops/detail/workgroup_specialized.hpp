// The workgroup-specialized kernels' type-erased face: one persistent launch whose first
// `gemm_blocks` blocks run CUTLASS's SM90 cooperative GEMM with the tile-store epilogue (each
// tile stored locally, its local flag raised) and whose remaining `side_blocks` blocks run a side
// role over those tiles as their flags rise: SendTiles (send_tiles.hpp: GemmAllScatter pushes
// each tile to the peers) or PullTiles (pull_reduce.cuh: GemmReduceScatter and GemmAllReduce
// pull every member's partial tile and sum them). Not public; needs no CUTLASS (the kernel is in
// workgroup_specialized_kernel.hpp).
//
// A side role is a trivially copyable struct with `__device__ void operator()(int block,
// int blocks) const`, run by every thread of side block `block` of `blocks` (the GEMM's thread
// count, not a reduction kernel's). The GEMM blocks never wait for it. It may wait for this
// launch's GEMM tiles (workgroup_split in comm_op.hpp divides the blocks), and for other ranks'
// GEMMs where the grid stays within this rank's budget (resident_workgroup_split), so that the
// grids of all ranks sharing the GPU are resident at once.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "iris/ops/detail/gemm_runner.hpp"
#include "iris/ops/detail/send_tiles.hpp"

namespace iris::ops::detail {

template <class Side>
class WorkgroupSpecializedGemm {
 public:
  virtual ~WorkgroupSpecializedGemm() = default;
  /// CUTLASS's own check of the GEMM part, after GemmArguments passed ours.
  virtual Status can_implement(const GemmArguments& args) const = 0;
  /// Blocks of this kernel that can be resident on the current GPU at once (its clusters times
  /// the cluster size); the op divides them among the ranks sharing the GPU.
  virtual int max_resident_blocks() const = 0;
  /// Blocks per cluster: gemm_blocks and side_blocks are multiples of it.
  virtual int cluster_size() const = 0;
  /// Binds the problem. `gemm_blocks` is the GEMM's block budget (CUTLASS may use fewer when the
  /// problem has fewer tiles), `side_blocks` the side role's; both multiples of cluster_size().
  virtual void initialize(const GemmArguments& args, const TileStore& store, const Side& side,
                          int gemm_blocks, int side_blocks) = 0;
  /// One launch on `stream`: stream-ordered, no allocation, graph-capturable.
  virtual void run(cudaStream_t stream) = 0;
  /// After initialize(): the GEMM blocks the launch uses.
  virtual int gemm_blocks() const = 0;
  virtual int tile_m() const = 0;
  virtual int tile_n() const = 0;
};

/// GEMM + send, bf16 -> bf16 (src/ops/gemm_all_scatter_ws_bf16.cu) and fp16 -> fp16
/// (src/ops/gemm_all_scatter_ws_f16.cu). GEMM + pull: make_gemm_and_pull_bf16 (pull_reduce.cuh).
std::unique_ptr<WorkgroupSpecializedGemm<SendTiles>> make_gemm_and_send_bf16();
std::unique_ptr<WorkgroupSpecializedGemm<SendTiles>> make_gemm_and_send_f16();
}  // namespace iris::ops::detail
