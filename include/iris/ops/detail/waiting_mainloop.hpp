// A mainloop wait hook for CUTLASS's SM90 TMA warp-specialized GEMMs, and the shard-waiting
// GEMM built on it (shard_wait.hpp says what that one does). Not public; include it only from
// src/ops/gemm_shard_wait_bf16.cu (one CUTLASS kernel per translation unit).
//
// WaitingMainloop<Mainloop, Hook> is CUTLASS's collective mainloop (the CollectiveMma that the
// collective builder gives, MainloopSm90TmaGmmaWarpSpecialized) with one change: load(), which
// the producer warp runs once per output tile, first calls
//     hook(params.hook, MainloopTile{m_block, n_block, l, k_tile_start, k_tiles})
// in all 32 lanes of that warp, then issues fence.proxy.async.global in every lane, then runs
// CUTLASS's load() (its elected lane issues the tile's TMA loads of A and B). The hook may wait
// (bounded); when it returns, whatever the tile reads must be visible to each calling lane (an
// acquire in every lane, or one lane's acquire and then __syncwarp()). The proxy fence is what
// makes that enough: TMA reads global memory through the async proxy, and an acquire by the
// generic proxy orders nothing for the async proxy until the same thread's fence.proxy.async
// (PTX ISA, memory consistency model, "proxies"). Everything else (the pipeline, the MMA warps,
// shared memory, parameters) is CUTLASS's.
//
// Clusters. The kernels here use 2 x 1 x 1 clusters: two CTAs with consecutive m blocks and the
// same n block. CUTLASS multicasts B, not A, across them (each CTA loads half of the B tile into
// both CTAs' shared memory; each loads its own A tile), so a CTA's pipeline stages also fill from
// its peer. A hook that waits in one CTA while its peer does not cannot deadlock: the peer keeps
// issuing its half of B into stages that the waiting CTA has not yet released, and stalls, as it
// would behind a slow consumer, until the wait ends; the wait itself depends only on writers
// outside the kernel. Both CTAs of a cluster always get tiles of the same m pair (the scheduler
// below rotates whole clusters), so they wait for the same shards anyway, the cluster's padding
// CTA past the last row included (it has no rows, so it does not wait).
#pragma once

#include <cuda/atomic>

#include <cstdint>
#include <string>

#include "iris/device/cmp.hpp"
#include "iris/device/context.hpp"
#include "iris/device/detail/ptx.hpp"
#include "iris/device/detail/wait.hpp"
#include "iris/ops/detail/gemm_kernel.hpp"
#include "iris/ops/detail/shard_wait.hpp"

namespace iris::ops::detail {

/// The output tile whose inputs the producer warp is about to load: its block coordinates and
/// the k-blocks it loads, [k_tile_start, k_tile_start + k_tiles).
struct MainloopTile {
  int m_block = 0, n_block = 0, l = 0;
  int k_tile_start = 0, k_tiles = 0;
};

/// Orders this thread's earlier generic-proxy accesses (the hook's acquire) before its later
/// async-proxy accesses of global memory (TMA loads).
CUTLASS_DEVICE void fence_proxy_async_global() {
#if defined(__CUDA_ARCH__)
  asm volatile("fence.proxy.async.global;" ::: "memory");
#endif
}

/// CUTLASS's SM90 TMA warp-specialized collective mainloop `Mainloop` with `Hook` called before
/// each tile's loads (see the top of this file). Hook: default-constructible (one object per
/// CTA's producer warp, kept across its tiles), with a trivially copyable `Params` and
///   CUTLASS_DEVICE void operator()(Hook::Params const&, MainloopTile const&);
template <class Mainloop, class Hook>
struct WaitingMainloop : Mainloop {
  using Base = Mainloop;
  using HookParams = typename Hook::Params;

  struct Arguments : Base::Arguments {
    HookParams hook{};
  };
  struct Params : Base::Params {
    HookParams hook{};
  };

  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const& problem, Arguments const& args,
                                        void* workspace) {
    Params params{};
    static_cast<typename Base::Params&>(params) =
        Base::to_underlying_arguments(problem, args, workspace);
    params.hook = args.hook;
    return params;
  }

  template <class ProblemShape>
  static bool can_implement(ProblemShape const& problem, Arguments const& args) {
    return Base::can_implement(problem, args);
  }

  template <class TensorA, class TensorB, class KTileIterator, class BlockCoord>
  CUTLASS_DEVICE void load(Params const& params, typename Base::MainloopPipeline pipeline,
                           typename Base::PipelineState smem_pipe_write,
                           cute::tuple<TensorA, TensorB> const& load_inputs,
                           BlockCoord const& blk_coord, KTileIterator k_tile_iter, int k_tile_count,
                           int thread_idx, uint32_t block_rank_in_cluster,
                           typename Base::TensorStorage& shared_tensors) {
    MainloopTile tile{};
    tile.m_block = static_cast<int>(cute::get<0>(blk_coord));
    tile.n_block = static_cast<int>(cute::get<1>(blk_coord));
    tile.l = static_cast<int>(cute::get<3>(blk_coord));
    tile.k_tile_start = static_cast<int>(*k_tile_iter);
    tile.k_tiles = k_tile_count;
    hook_(params.hook, tile);
    fence_proxy_async_global();
    Base::load(params, pipeline, smem_pipe_write, load_inputs, blk_coord, k_tile_iter, k_tile_count,
               thread_idx, block_rank_in_cluster, shared_tensors);
  }

 private:
  Hook hook_{};
};

/// Writes `value` (>= 0) in decimal at `out`; returns the end.
CUTLASS_DEVICE char* append_decimal(char* out, int value) {
  char digits[10];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0 && n < 10);
  while (n > 0) *out++ = digits[--n];
  return out;
}

/// The shard-waiting GEMM's hook (ShardWait, shard_wait.hpp): before tile (m, n) loads, waits
/// until flags[q] >= *epoch for every shard q that holds one of the tile's BLK_M rows. Lane 0
/// spins (bounded by ctx.wait_timeout_ns(); the report names the tile and the shard, e.g.
/// "rank 1: tile m3 n0 shard 2(heap offset 0x... on rank 1, ge 7) timed out after ..."), then
/// the warp syncs and every lane acquires the flag once more (it reads the value lane 0 saw or a
/// later one), so each lane's own acquire precedes its proxy fence. A shard seen ready is not
/// waited for again by this CTA in this run: its rows are already visible to every lane.
template <int kBlockM>
struct ShardReadyHook {
  using Params = ShardWait;

  CUTLASS_DEVICE void operator()(Params const& p, MainloopTile const& tile) {
    const std::int64_t m = std::int64_t{p.rows} * p.shards;
    const std::int64_t r0 = std::int64_t{tile.m_block} * kBlockM;
    if (r0 >= m) return;  // a cluster's padding tile: no rows
    const std::int64_t r1 = r0 + kBlockM < m ? r0 + kBlockM : m;
    if (!have_epoch_) {
      epoch_ = *p.epoch;  // written before the launch, in stream order
      have_epoch_ = true;
    }
    const int first = static_cast<int>(r0 / p.rows), last = static_cast<int>((r1 - 1) / p.rows);
    using Acquire =
        iris::device::detail::ptx<cuda::memory_order_acquire, cuda::thread_scope_system>;
    for (int q = first; q <= last; ++q) {
      const std::uint64_t bit = q < 64 ? std::uint64_t{1} << q : 0;
      if ((ready_ & bit) != 0) continue;
      const std::uint64_t* flag = p.flags + q;
      if ((threadIdx.x & 31) == 0 && Acquire::load(flag) < epoch_) {
        char name[48];  // at most 45 characters; the report keeps the first 31
        char* end = name;
        for (const char* s = "tile m"; *s != '\0'; ++s) *end++ = *s;
        end = append_decimal(end, tile.m_block);
        *end++ = ' ';
        *end++ = 'n';
        end = append_decimal(end, tile.n_block);
        for (const char* s = " shard "; *s != '\0'; ++s) *end++ = *s;
        end = append_decimal(end, q);
        *end = '\0';
        iris::device::detail::wait_for<cuda::memory_order_acquire, cuda::thread_scope_system>(
            p.ctx, name, flag, p.ctx.rank(), iris::cmp::ge, epoch_);
      }
      __syncwarp();
      (void)Acquire::load(flag);  // >= epoch_: this lane's own acquire
      ready_ |= bit;
    }
  }

 private:
  std::uint64_t epoch_ = 0;
  std::uint64_t ready_ = 0;  // shards 0..63 seen ready
  bool have_epoch_ = false;
};

/// CUTLASS's PersistentTileSchedulerSm90Params plus the rotation of the m clusters.
struct ShardOrderSchedulerParams
    : cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90Params {
  std::uint32_t first_cluster_m = 0;  ///< m cluster visited first
};

/// PersistentTileSchedulerSm90 whose tiles start at the m cluster first_cluster_m and wrap
/// around: tile t of CUTLASS's order (rasterised along N, so m changes slowest) becomes the
/// tile (m + first_cluster_m * cluster_m) mod padded-m. Whole clusters move, so both CTAs of a
/// cluster keep consecutive m blocks and the same n block (B's multicast). Only the current
/// work (and its callers) is shadowed here; the position and the rest are CUTLASS's.
template <int kClusterM>
class ShardOrderScheduler : public cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90 {
  using Base = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90;

 public:
  using Params = ShardOrderSchedulerParams;
  using WorkTileInfo = typename Base::WorkTileInfo;

  struct Arguments : Base::Arguments {
    std::uint32_t first_cluster_m = 0;
  };

  template <class ProblemShape, class TileShape, class ClusterShape>
  static Params to_underlying_arguments(ProblemShape problem, TileShape tile, ClusterShape cluster,
                                        cutlass::KernelHardwareInfo const& hw_info,
                                        Arguments const& args, void* workspace = nullptr,
                                        const uint32_t epilogue_subtile = 1,
                                        uint32_t ktile_start_alignment_count = 1u) {
    Params params{};
    static_cast<Base::Params&>(params) =
        Base::to_underlying_arguments(problem, tile, cluster, hw_info, args, workspace,
                                      epilogue_subtile, ktile_start_alignment_count);
    params.first_cluster_m =
        params.problem_tiles_m_ > 0 ? args.first_cluster_m % params.problem_tiles_m_ : 0;
    return params;
  }

  CUTLASS_HOST_DEVICE ShardOrderScheduler() {}

  CUTLASS_DEVICE explicit ShardOrderScheduler(Params const& params)
      : Base(params), first_cluster_m_(params.first_cluster_m) {}

  /// CUTLASS's current tile (its position, advance and last-tile test are CUTLASS's), with the
  /// m clusters rotated.
  CUTLASS_DEVICE WorkTileInfo get_current_work() const {
    WorkTileInfo info = Base::get_current_work();
    if (info.is_valid() && first_cluster_m_ != 0) {
      const auto clusters_m = static_cast<std::int32_t>(scheduler_params.problem_tiles_m_);
      const std::int32_t cluster = info.M_idx / kClusterM, within = info.M_idx % kClusterM;
      info.M_idx =
          ((cluster + static_cast<std::int32_t>(first_cluster_m_)) % clusters_m) * kClusterM +
          within;
    }
    return info;
  }
  // CUTLASS's callers of get_current_work(), which would call its own.
  template <class ClusterShape>
  CUTLASS_DEVICE WorkTileInfo initial_work_tile_info(ClusterShape) {
    return get_current_work();
  }
  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo) {
    Base::advance_to_next_work();
    return cute::make_tuple(get_current_work(), true);
  }
  template <class Pipeline, class PipelineState>
  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo info, Pipeline&, PipelineState) {
    return fetch_next_work(info);
  }

 private:
  std::uint32_t first_cluster_m_ = 0;
};

/// The tag that selects ShardOrderScheduler through CUTLASS's TileSchedulerSelector.
struct ShardOrderSchedulerTag {};

}  // namespace iris::ops::detail

namespace cutlass::gemm::kernel::detail {
template <class ArchTag, class TileShape, class ClusterShape, uint32_t Stages, class Problem>
struct TileSchedulerSelector<iris::ops::detail::ShardOrderSchedulerTag, ArchTag, TileShape,
                             ClusterShape, Stages, Problem> {
  using Scheduler = iris::ops::detail::ShardOrderScheduler<cute::size<0>(ClusterShape{})>;
};
}  // namespace cutlass::gemm::kernel::detail

namespace iris::ops::detail {

/// PlainGemm's kernel (CUTLASS's TMA epilogue into D) with the shard-ready hook in its mainloop
/// and the shard-order scheduler.
template <class ElementAB, class ElementD>
struct ShardWaitConfig {
  using Epilogue = typename PlainGemm<ElementAB, ElementD>::Epilogue;
  using Mainloop =
      WaitingMainloop<MainloopFor<ElementAB, Epilogue>, ShardReadyHook<cute::size<0>(TileShape{})>>;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop,
                                                      Epilogue, ShardOrderSchedulerTag>;
};

template <class Config>
class ShardWaitRunner final : public ShardWaitGemm {
 public:
  using Kernel = typename Config::Kernel;
  using Adapter = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  static constexpr int kBlockM = cute::size<0>(TileShape{});
  static constexpr int kClusterM = cute::size<0>(ClusterShape{});

  Status can_implement(const GemmArguments& args) const override {
    return cutlass_rejects(Adapter::can_implement(make_arguments(args, ShardWait{})));
  }

  void initialize(const GemmArguments& args, const ShardWait& wait, cudaStream_t stream) override {
    if (wait.flags == nullptr || wait.epoch == nullptr || wait.rows <= 0 || wait.shards <= 0 ||
        std::int64_t{wait.rows} * wait.shards != args.m || wait.first_shard < 0 ||
        wait.first_shard >= wait.shards)
      throw Error(Errc::kInternal, "shard-waiting GEMM: the shards do not cover M");
    const auto arguments = make_arguments(args, wait);
    if (Adapter::get_workspace_size(arguments) != 0)
      throw Error(Errc::kInternal, "shard-waiting GEMM: CUTLASS asks for a workspace");
    const auto status = op_.initialize(arguments, nullptr, stream);
    if (status != cutlass::Status::kSuccess)
      throw Error(Errc::kInvalidArgument,
                  std::string("CUTLASS GEMM initialize failed: ") + cutlassGetStatusString(status));
    initialized_ = true;
  }

  void run(cudaStream_t stream) override {
    if (!initialized_) throw Error(Errc::kInternal, "shard-waiting GEMM run before initialize");
    const auto status = op_.run(stream);
    if (status != cutlass::Status::kSuccess)
      throw Error(Errc::kCuda,
                  std::string("CUTLASS GEMM launch failed: ") + cutlassGetStatusString(status),
                  static_cast<int>(cudaGetLastError()));
  }

  int tile_m() const override { return kBlockM; }
  int tile_n() const override { return cute::size<1>(TileShape{}); }

 private:
  static typename Adapter::Arguments make_arguments(const GemmArguments& g, const ShardWait& wait) {
    auto arguments = gemm_arguments<Kernel, false, true>(g);
    arguments.mainloop.hook = wait;
    // m changes slowest along the tile order, so the tiles come shard by shard, from the
    // cluster of m blocks that holds the first shard's first row.
    arguments.scheduler.raster_order =
        cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90::RasterOrderOptions::AlongN;
    // The first cluster wholly inside that shard: a cluster that straddles it and the shard
    // before (pulled last) comes last.
    constexpr std::int64_t kClusterRows = std::int64_t{kBlockM} * kClusterM;
    if (wait.rows > 0)
      arguments.scheduler.first_cluster_m = static_cast<std::uint32_t>(
          (std::int64_t{wait.first_shard} * wait.rows + kClusterRows - 1) / kClusterRows);
    return arguments;
  }

  Adapter op_;
  bool initialized_ = false;
};

}  // namespace iris::ops::detail
