// The workgroup-specialized GEMM + all-scatter kernel's type-erased face: one persistent launch
// whose first `gemm_blocks` blocks run CUTLASS's SM90 cooperative GEMM with the tile-store
// epilogue (each tile stored locally, its local flag raised) and whose remaining `send_blocks`
// blocks run send_tiles (send_tiles.hpp), pushing each tile to the peers as its flag rises. Not
// public; needs no CUTLASS (the kernel is in workgroup_specialized_kernel.hpp).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "iris/ops/detail/gemm_runner.hpp"
#include "iris/ops/detail/send_tiles.hpp"

namespace iris::ops::detail {

class WorkgroupSpecializedGemm {
 public:
  virtual ~WorkgroupSpecializedGemm() = default;
  /// CUTLASS's own check of the GEMM part, after GemmArguments passed ours.
  virtual Status can_implement(const GemmArguments& args) const = 0;
  /// Blocks of this kernel that can be resident on the current GPU at once (its clusters times
  /// the cluster size); the op divides them among the ranks sharing the GPU.
  virtual int max_resident_blocks() const = 0;
  /// Blocks per cluster: gemm_blocks and send_blocks are multiples of it.
  virtual int cluster_size() const = 0;
  /// Binds the problem. `gemm_blocks` is the GEMM's block budget (CUTLASS may use fewer when the
  /// problem has fewer tiles), `send_blocks` the senders'; both multiples of cluster_size().
  virtual void initialize(const GemmArguments& args, const TileStore& store, const SendTiles& sends,
                          int gemm_blocks, int send_blocks) = 0;
  /// One launch on `stream`: stream-ordered, no allocation, graph-capturable.
  virtual void run(cudaStream_t stream) = 0;
  /// After initialize(): the GEMM blocks the launch uses.
  virtual int gemm_blocks() const = 0;
  virtual int tile_m() const = 0;
  virtual int tile_n() const = 0;
};

/// bf16 -> bf16 (src/ops/gemm_all_scatter_ws_bf16.cu) and fp16 -> fp16
/// (src/ops/gemm_all_scatter_ws_f16.cu).
std::unique_ptr<WorkgroupSpecializedGemm> make_workgroup_specialized_gemm_bf16();
std::unique_ptr<WorkgroupSpecializedGemm> make_workgroup_specialized_gemm_f16();

}  // namespace iris::ops::detail
