// The workgroup-specialized kernels (workgroup_specialized.hpp says what they do). Not public;
// include it only from the translation units that instantiate one kernel each
// (src/ops/gemm_all_scatter_ws_{bf16,f16}.cu: GEMM + send; src/ops/gemm_pull_ws_bf16.cu:
// GEMM + pull).
//
// One launch, a 1-D grid of clusters: blocks [0, G) run CUTLASS's cooperative GEMM kernel
// (GemmUniversal::operator(), exactly what CUTLASS's device_kernel runs), blocks [G, G + S)
// run the side role. CUTLASS's persistent scheduler strides tiles by the whole grid (gridDim),
// which would make GEMM blocks skip the tiles "owned" by the side blocks; GemmBlocksScheduler is
// that scheduler with the stride taken from its Params (G) instead. G is what CUTLASS's own
// get_grid_shape gives for the GEMM alone, so the GEMM blocks see the tile order of a plain
// launch of G blocks: CUTLASS launches that grid as (2, G/2) or (G, 1) with 2 x 1 clusters, and
// both number block b of a 1-D grid as linear index b with b % 2 its rank in the cluster.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <type_traits>

#include "iris/ops/detail/gemm_kernel.hpp"
#include "iris/ops/detail/workgroup_specialized.hpp"

namespace iris::ops::detail {

/// CUTLASS's PersistentTileSchedulerSm90Params plus the number of blocks that compute.
struct GemmBlocksSchedulerParams
    : cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90Params {
  std::uint64_t gemm_blocks = 0;
};

/// PersistentTileSchedulerSm90 with the grid's size replaced by Params::gemm_blocks and the
/// block's linear index by blockIdx.x (the launch is 1-D). Everything that reads CUTLASS's own
/// position (constructor, current/next work, last-tile test) is shadowed here; the rest
/// (tile-to-coordinate maths, k-tile counts, grid shape) is CUTLASS's.
class GemmBlocksScheduler : public cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90 {
  using Base = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90;

 public:
  using Params = GemmBlocksSchedulerParams;
  using WorkTileInfo = typename Base::WorkTileInfo;

  template <class... Ts>
  static Params to_underlying_arguments(Ts&&... ts) {
    Params params{};
    static_cast<Base::Params&>(params) = Base::to_underlying_arguments(static_cast<Ts&&>(ts)...);
    return params;
  }

  CUTLASS_HOST_DEVICE GemmBlocksScheduler() {}

  CUTLASS_DEVICE explicit GemmBlocksScheduler(Params const& params) {
    scheduler_params = params;
#if defined(__CUDA_ARCH__)
    linear_ = blockIdx.x;
#endif
    stride_ = params.gemm_blocks;
  }

  template <class ClusterShape>
  CUTLASS_DEVICE WorkTileInfo initial_work_tile_info(ClusterShape) {
    return get_current_work();
  }
  CUTLASS_DEVICE WorkTileInfo get_current_work() const {
    return get_current_work_for_linear_idx(linear_);
  }
  CUTLASS_DEVICE void advance_to_next_work(std::uint32_t count = 1) { linear_ += stride_ * count; }
  CUTLASS_DEVICE bool is_last_tile(WorkTileInfo&, std::uint32_t count = 1) const {
    return !get_current_work_for_linear_idx(linear_ + stride_ * count).is_valid();
  }
  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo) {
    advance_to_next_work();
    return cute::make_tuple(get_current_work(), true);
  }
  template <class Pipeline, class PipelineState>
  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo info, Pipeline&, PipelineState) {
    return fetch_next_work(info);
  }

 private:
  std::uint64_t linear_ = 0;
  std::uint64_t stride_ = 1;
};

/// The tag that selects GemmBlocksScheduler through CUTLASS's TileSchedulerSelector.
struct GemmBlocksSchedulerTag {};

}  // namespace iris::ops::detail

namespace cutlass::gemm::kernel::detail {
template <class ArchTag, class TileShape, class ClusterShape, uint32_t Stages, class Problem>
struct TileSchedulerSelector<iris::ops::detail::GemmBlocksSchedulerTag, ArchTag, TileShape,
                             ClusterShape, Stages, Problem> {
  using Scheduler = iris::ops::detail::GemmBlocksScheduler;
};
}  // namespace cutlass::gemm::kernel::detail

namespace iris::ops::detail {

/// TileStoreGemm's kernel with the GEMM-blocks scheduler.
template <class ElementAB, class ElementD>
struct WorkgroupSpecializedConfig {
  using Epilogue = typename TileStoreGemm<ElementAB, ElementD>::Epilogue;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>,
                                                      MainloopFor<ElementAB, Epilogue>, Epilogue,
                                                      GemmBlocksSchedulerTag>;
};

/// Blocks below params.scheduler.gemm_blocks compute (CUTLASS's device_kernel body); the others
/// run the side role (workgroup_specialized.hpp says what a side role is).
template <class Kernel, class Side>
__global__ void __launch_bounds__(Kernel::MaxThreadsPerBlock, Kernel::MinBlocksPerMultiprocessor)
    gemm_and(CUTLASS_GRID_CONSTANT typename Kernel::Params const params,
             CUTLASS_GRID_CONSTANT Side const side) {
  extern __shared__ char smem[];
  const auto gemm_blocks = static_cast<unsigned>(params.scheduler.gemm_blocks);
  if (blockIdx.x < gemm_blocks) {
    Kernel op;
    op(params, smem);
  } else {
    side(static_cast<int>(blockIdx.x - gemm_blocks), static_cast<int>(gridDim.x - gemm_blocks));
  }
}

template <class Config, class Side>
class WorkgroupSpecializedRunner final : public WorkgroupSpecializedGemm<Side> {
  static_assert(std::is_trivially_copyable_v<Side>, "a side role is a kernel argument");

 public:
  using Kernel = typename Config::Kernel;
  using ElementD = typename Kernel::CollectiveEpilogue::ElementD;
  static constexpr int kClusterSize = cute::size(ClusterShape{});

  Status can_implement(const GemmArguments& args) const override {
    TileStore store{};
    store.receivers = iris::team{0, 1, 1};  // the GEMM's checks only; the op checks the team
    if (Kernel::can_implement(make_arguments(args, store, kClusterSize))) return Status::success();
    return Status::failure("CUTLASS's SM90 kernel rejects this problem");
  }

  int max_resident_blocks() const override {
    prepare();
    int device = 0, sms = 0;
    IRIS_CUDA_CHECK(cudaGetDevice(&device));
    IRIS_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    cudaLaunchAttribute attribute[1];
    cudaLaunchConfig_t config =
        launch_config(sms / kClusterSize * kClusterSize, nullptr, attribute);
    int clusters = 0;
    IRIS_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, gemm_and<Kernel, Side>, &config));
    return clusters * kClusterSize;
  }

  int cluster_size() const override { return kClusterSize; }

  void initialize(const GemmArguments& args, const TileStore& store, const Side& side,
                  int gemm_blocks, int side_blocks) override {
    if (gemm_blocks < kClusterSize || gemm_blocks % kClusterSize != 0 || side_blocks < 0 ||
        side_blocks % kClusterSize != 0)
      throw Error(Errc::kInternal,
                  "workgroup-specialized GEMM: block counts must be multiples of " +
                      std::to_string(kClusterSize));
    prepare();
    const auto arguments = make_arguments(args, store, gemm_blocks);
    if (Kernel::get_workspace_size(arguments) != 0)
      throw Error(Errc::kInternal, "workgroup-specialized GEMM: CUTLASS asks for a workspace");
    params_ = Kernel::to_underlying_arguments(arguments, nullptr);
    const dim3 grid = Kernel::get_grid_shape(params_);
    const auto blocks = grid.x * grid.y * grid.z;
    if (blocks == 0 || blocks % kClusterSize != 0 || blocks > unsigned(gemm_blocks))
      throw Error(Errc::kInternal, "workgroup-specialized GEMM: CUTLASS's grid of " +
                                       std::to_string(blocks) + " blocks does not fit");
    params_.scheduler.gemm_blocks = blocks;
    side_ = side;
    side_blocks_ = side_blocks;
  }

  void run(cudaStream_t stream) override {
    if (params_.scheduler.gemm_blocks == 0)
      throw Error(Errc::kInternal, "workgroup-specialized GEMM run before initialize");
    cudaLaunchAttribute attribute[1];
    const int blocks = static_cast<int>(params_.scheduler.gemm_blocks) + side_blocks_;
    cudaLaunchConfig_t config = launch_config(blocks, stream, attribute);
    IRIS_CUDA_CHECK(cudaLaunchKernelEx(&config, gemm_and<Kernel, Side>, params_, side_));
  }

  int gemm_blocks() const override { return static_cast<int>(params_.scheduler.gemm_blocks); }
  int tile_m() const override { return cute::size<0>(TileShape{}); }
  int tile_n() const override { return cute::size<1>(TileShape{}); }

 private:
  // The kernel's dynamic shared memory exceeds the default 48 KiB: raise the limit (for the
  // current device; cheap, so done at every initialize rather than once per process).
  static void prepare() {
    IRIS_CUDA_CHECK(cudaFuncSetAttribute(gemm_and<Kernel, Side>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         Kernel::SharedStorageSize));
  }

  static cudaLaunchConfig_t launch_config(int blocks, cudaStream_t stream,
                                          cudaLaunchAttribute (&attribute)[1]) {
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(static_cast<unsigned>(blocks), 1, 1);
    config.blockDim = Kernel::get_block_shape();
    config.dynamicSmemBytes = Kernel::SharedStorageSize;
    config.stream = stream;
    attribute[0].id = cudaLaunchAttributeClusterDimension;
    attribute[0].val.clusterDim.x = kClusterSize;
    attribute[0].val.clusterDim.y = 1;
    attribute[0].val.clusterDim.z = 1;
    config.attrs = attribute;
    config.numAttrs = 1;
    return config;
  }

  static typename Kernel::Arguments make_arguments(const GemmArguments& g, const TileStore& store,
                                                   int gemm_blocks) {
    auto arguments = gemm_arguments<Kernel, false, false>(g);
    arguments.epilogue.d = static_cast<ElementD*>(g.d);
    arguments.epilogue.ldd = g.ldd ? g.ldd : g.n;
    arguments.epilogue.store = store;
    arguments.hw_info.sm_count = gemm_blocks;  // CUTLASS's grid for the GEMM alone
    return arguments;
  }

  typename Kernel::Params params_{};
  Side side_{};
  int side_blocks_ = 0;
};

}  // namespace iris::ops::detail
