// The CUTLASS kernels behind iris::ops::Gemm: SM90 TMA + wgmma mainloop from CUTLASS's
// collective builder, warp-specialized cooperative schedule, persistent tile scheduler (stream-K
// for the small-M configuration), and either CUTLASS's TMA epilogue (plain GEMM) or the
// tile-store epilogue (tile_epilogue.hpp).
// Not public; include it only from the translation units under src/ops/ that instantiate one
// kernel each (CUTLASS kernels are slow to compile).
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/collective/detail.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
#include "cutlass/kernel_hardware_info.h"
#include "iris/host/error.hpp"
#include "iris/ops/detail/gemm_runner.hpp"
#include "iris/ops/detail/tile_epilogue.hpp"

namespace iris::ops::detail {

/// The CTA tile and cluster of the large-tile configuration and the tile-store kernels:
/// 128 x 256 x 64 with a 2 x 1 cluster (the B tile multicast to the two CTAs along M) is the
/// shape CUTLASS's profiler favours for large bf16/fp16 GEMMs.
using TileShape = cute::Shape<cute::_128, cute::_256, cute::_64>;
using ClusterShape = cute::Shape<cute::_2, cute::_1, cute::_1>;
using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;

// clang-format off
/// The mainloop of a CTA tile and cluster shape (the cooperative schedule).
template <class ElementAB, class CollectiveEpilogue, class Tile, class Cluster>
using MainloopOf = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    ElementAB, cutlass::layout::RowMajor, 16 / sizeof(ElementAB),     // A: M x K, K contiguous
    ElementAB, cutlass::layout::ColumnMajor, 16 / sizeof(ElementAB),  // B: N x K, K contiguous
    float, Tile, Cluster,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
        sizeof(typename CollectiveEpilogue::SharedStorage))>,
    KernelSchedule>::CollectiveOp;

/// CUTLASS's TMA epilogue of a CTA tile and cluster shape: D = accumulators, no source C; D
/// row-major, or column-major for the swap-AB kernel (which computes D^T).
template <class ElementD, class Tile, class Cluster, class LayoutD = cutlass::layout::RowMajor>
using TmaEpilogueOf = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float,
    void, LayoutD, 16 / sizeof(ElementD),
    ElementD, LayoutD, 16 / sizeof(ElementD),
    cutlass::epilogue::TmaWarpSpecializedCooperative>::CollectiveOp;
// clang-format on

template <class ElementAB, class CollectiveEpilogue>
using MainloopFor = MainloopOf<ElementAB, CollectiveEpilogue, TileShape, ClusterShape>;

/// D = A * B^T with CUTLASS's TMA epilogue (no source C).
template <class ElementAB, class ElementD>
struct PlainGemm {
  using Epilogue = TmaEpilogueOf<ElementD, TileShape, ClusterShape>;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>,
                                                      MainloopFor<ElementAB, Epilogue>, Epilogue,
                                                      cutlass::gemm::PersistentScheduler>;
  static constexpr bool kTileStore = false;
  static constexpr bool kSwapAB = false;
};

/// D = A * B^T with the tile-store epilogue: every tile to every receiver, per-tile flags.
/// Four column passes of 64: the 128 accumulators stay live across the passes, and with a
/// pass's 16-byte units on top, two passes of 128 columns spilled registers (ptxas -v); four
/// do not, and their staging tile (18 KiB) leaves the mainloop its four stages.
template <class ElementAB, class ElementD>
struct TileStoreGemm {
  using Epilogue = TileStoreCollective<TileStoreEpilogue<ElementD, TileShape, 4>>;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>,
                                                      MainloopFor<ElementAB, Epilogue>, Epilogue,
                                                      cutlass::gemm::PersistentScheduler>;
  static constexpr bool kTileStore = true;
  static constexpr bool kSwapAB = false;
};

/// D = A * B^T with a CTA tile and cluster, CUTLASS's stream-K tile scheduler and its TMA
/// epilogue; with SwapAB, D^T = B * A^T (see SwapABGemm), D^T written column-major.
template <class ElementAB, class ElementD, class Tile, class Cluster, bool SwapAB>
struct StreamKGemm {
  using Epilogue = TmaEpilogueOf<
      ElementD, Tile, Cluster,
      std::conditional_t<SwapAB, cutlass::layout::ColumnMajor, cutlass::layout::RowMajor>>;
  using Kernel =
      cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>,
                                           MainloopOf<ElementAB, Epilogue, Tile, Cluster>, Epilogue,
                                           cutlass::gemm::StreamKScheduler>;
  static constexpr bool kTileStore = false;
  static constexpr bool kSwapAB = SwapAB;
};

/// Whether a CUTLASS tile and cluster are the GemmConfigShape the selection rule reads.
template <class Tile, class Cluster>
constexpr bool matches(GemmConfigShape shape) {
  return cute::size<0>(Tile{}) == shape.tile_m && cute::size<1>(Tile{}) == shape.tile_n &&
         cute::size<0>(Cluster{}) == shape.cluster_m && cute::size<1>(Cluster{}) == shape.cluster_n;
}

/// The small-M configuration (GemmConfig::kSmallM, bf16 -> bf16): a 128 x 64 x 64 CTA tile (the
/// cooperative schedule's smallest M: two consumer warpgroups of 64 rows), 1 x 2 clusters (the A
/// tile multicast to the two CTAs along N) and CUTLASS's stream-K tile scheduler. When M is small
/// the large tile leaves most SMs without a tile; a 64-column tile gives 4x as many tiles, and
/// where even those are fewer than half the SMs, the scheduler splits K across SMs (stream-K or
/// split-K, its heuristic) and reduces the partial tiles through the workspace. The rule that
/// picks it is detail::select_config (gemm.cpp); the shapes below are kSmallMShape there.
using SmallMTileShape = cute::Shape<cute::_128, cute::_64, cute::_64>;
using SmallMClusterShape = cute::Shape<cute::_1, cute::_2, cute::_1>;
static_assert(matches<SmallMTileShape, SmallMClusterShape>(kSmallMShape),
              "kSmallMShape (gemm_runner.hpp, read by the selection rule) must match the kernel");

/// D = A * B^T with the small-M tile, stream-K scheduler and CUTLASS's TMA epilogue.
template <class ElementAB, class ElementD>
using SmallMGemm = StreamKGemm<ElementAB, ElementD, SmallMTileShape, SmallMClusterShape, false>;

/// The swap-AB configuration (GemmConfig::kSwapAB, bf16 -> bf16) computes D^T = B * A^T: CUTLASS
/// is given the problem (M' = N, N' = M, K), the weights B (N x K, K contiguous) as its A operand
/// and the activations A (M x K, K contiguous) as its B operand, the same K-major layouts as the
/// other kernels, so the same mainloop; D^T (N x M) is written column-major with leading
/// dimension ldd, which is D row-major. A wgmma is 64 rows of its A operand by 8..256 columns, so
/// with the tokens on the N' side a 128 x 32 tile wastes at most 31 columns where the small-M
/// tile wastes 127 of 128 rows: at M <= 32 the kernel streams B once, bandwidth-bound, its tensor
/// cores busy a small part of the time the bytes take. 128 rows is the cooperative schedule's
/// smallest M' (stream-K needs it); K 64 keeps the 128-byte-swizzled TMA boxes of the other
/// kernels, and at 20 KiB a stage the carveout leaves about ten stages in flight per SM.
/// No cluster (1 x 1): B, the operand worth multicasting, is shared only between N' tiles, which
/// exist only at M > 32, and a 1 x 2 cluster would leave half its CTAs without columns at
/// M <= 32; multicasting A along M' would save L2 reads, not memory ones. N = 4096..8192 gives
/// 32..64 tiles of 128 rows, fewer than the SMs, so the stream-K scheduler splits K across them.
/// The shapes below are kSwapABShape (gemm_runner.hpp), in the swapped problem's terms.
using SwapABTileShape = cute::Shape<cute::_128, cute::_32, cute::_64>;
using SwapABClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
static_assert(matches<SwapABTileShape, SwapABClusterShape>(kSwapABShape),
              "kSwapABShape (gemm_runner.hpp, read by the selection rule) must match the kernel");

/// D^T = B * A^T with the swap-AB tile, stream-K scheduler and a column-major TMA epilogue.
template <class ElementAB, class ElementD>
using SwapABGemm = StreamKGemm<ElementAB, ElementD, SwapABTileShape, SwapABClusterShape, true>;

/// Whether a kernel's scheduler is CUTLASS's stream-K scheduler: its reduction locks in the
/// workspace count up during a launch and are never reset by the kernel, so every launch must
/// start from the zeroed locks that Kernel::initialize_workspace leaves.
template <class Kernel>
inline constexpr bool kUsesStreamK =
    std::is_same_v<typename Kernel::TileSchedulerTag, cutlass::gemm::StreamKScheduler>;

/// What CUTLASS says of a problem it rejects, as the runners' can_implement reports it.
inline Status cutlass_rejects(cutlass::Status status) {
  if (status == cutlass::Status::kSuccess) return Status::success();
  return Status::failure(std::string("CUTLASS's SM90 kernel rejects this problem (") +
                         cutlassGetStatusString(status) + ")");
}

/// The arguments every iris::ops CUTLASS kernel takes from GemmArguments, in CUTLASS's terms:
/// the problem, A and B with their strides, the device and its SMs (0: CUTLASS asks the device at
/// initialize; can_implement never needs the count), and with TmaEpilogue, D for CUTLASS's TMA
/// epilogue (no source C). With Swap (the swap-AB kernel) the problem is (N, M, K), B and A are
/// exchanged and D^T gets the column-major stride (1, ldd). Kernel-specific fields (a tile-store
/// epilogue, a mainloop hook, the scheduler) are the caller's.
template <class Kernel, bool Swap, bool TmaEpilogue>
typename Kernel::Arguments gemm_arguments(const GemmArguments& g) {
  using StrideA = typename Kernel::StrideA;
  using StrideB = typename Kernel::StrideB;
  const std::int64_t lda = g.lda ? g.lda : g.k, ldb = g.ldb ? g.ldb : g.k;
  const std::int64_t ldd = g.ldd ? g.ldd : g.n;
  typename Kernel::Arguments arguments{};
  arguments.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  arguments.problem_shape = {Swap ? g.n : g.m, Swap ? g.m : g.n, g.k, 1};
  arguments.mainloop.ptr_A = static_cast<const typename Kernel::ElementA*>(Swap ? g.b : g.a);
  arguments.mainloop.dA = StrideA{Swap ? ldb : lda, cute::Int<1>{}, 0};
  arguments.mainloop.ptr_B = static_cast<const typename Kernel::ElementB*>(Swap ? g.a : g.b);
  arguments.mainloop.dB = StrideB{Swap ? lda : ldb, cute::Int<1>{}, 0};
  if constexpr (TmaEpilogue) {
    using StrideD = typename Kernel::CollectiveEpilogue::StrideD;
    StrideD stride_d{};
    if constexpr (Swap)
      stride_d = StrideD{cute::Int<1>{}, ldd, 0};
    else
      stride_d = StrideD{ldd, cute::Int<1>{}, 0};
    arguments.epilogue.thread.alpha = 1.0f;
    arguments.epilogue.thread.beta = 0.0f;
    arguments.epilogue.ptr_C = nullptr;
    arguments.epilogue.dC = stride_d;
    arguments.epilogue.ptr_D = static_cast<typename Kernel::CollectiveEpilogue::ElementD*>(g.d);
    arguments.epilogue.dD = stride_d;
  }
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    device = 0;
  }
  arguments.hw_info.device_id = device;
  arguments.hw_info.sm_count = g.sm_count;
  return arguments;
}

template <class Config>
class CutlassRunner final : public GemmRunner {
 public:
  using Kernel = typename Config::Kernel;
  using Adapter = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using ElementD = typename Kernel::CollectiveEpilogue::ElementD;

  Status can_implement(const GemmArguments& args) const override {
    return cutlass_rejects(Adapter::can_implement(make_arguments(args, nullptr)));
  }

  std::size_t workspace_size(const GemmArguments& args) const override {
    return Adapter::get_workspace_size(make_arguments(args, nullptr));
  }

  void initialize(const GemmArguments& args, const TileStore* store, void* workspace,
                  cudaStream_t stream) override {
    if (Config::kTileStore && store == nullptr)
      throw Error(Errc::kInternal, "tile-store GEMM initialized without a TileStore");
    auto arguments = make_arguments(args, store);
    if constexpr (kUsesStreamK<Kernel>) {
      // One SM count for the workspace's size and layout, the launch and every reset in run();
      // resolved here so that run() asks the device nothing.
      if (arguments.hw_info.sm_count <= 0)
        arguments.hw_info.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(
            arguments.hw_info.device_id);
      if (workspace == nullptr && Adapter::get_workspace_size(arguments) > 0)
        throw Error(Errc::kInvalidArgument,
                    "the stream-K GEMM needs a workspace of " +
                        std::to_string(Adapter::get_workspace_size(arguments)) +
                        " bytes and got none");
      stream_k_arguments_ = arguments;
      stream_k_workspace_ = workspace;
    }
    const auto status = op_.initialize(arguments, workspace, stream);
    if (status != cutlass::Status::kSuccess)
      throw Error(Errc::kInvalidArgument,
                  std::string("CUTLASS GEMM initialize failed: ") + cutlassGetStatusString(status));
    // CUTLASS cleared the stream-K locks on `stream`. Wait for it: a run() on another stream is
    // not ordered after it, and a clearing that lands while that run's splits count the locks
    // up leaves a split waiting forever.
    if constexpr (kUsesStreamK<Kernel>)
      if (workspace != nullptr) IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  void run(cudaStream_t stream) override {
    if constexpr (kUsesStreamK<Kernel>) {
      // The previous launch left its reduction locks counted up: clear them (a cudaMemsetAsync
      // of the lock part of the workspace, nothing when the decomposition is data-parallel).
      const auto reset =
          Kernel::initialize_workspace(stream_k_arguments_, stream_k_workspace_, stream);
      if (reset != cutlass::Status::kSuccess)
        throw Error(Errc::kCuda,
                    std::string("clearing the stream-K GEMM's workspace failed: ") +
                        cutlassGetStatusString(reset),
                    static_cast<int>(cudaGetLastError()));
    }
    const auto status = op_.run(stream);
    if (status != cutlass::Status::kSuccess)
      throw Error(Errc::kCuda,
                  std::string("CUTLASS GEMM launch failed: ") + cutlassGetStatusString(status),
                  static_cast<int>(cudaGetLastError()));
  }

  // In D's terms: a swap-AB tile covers size<1> rows of D and size<0> columns.
  int tile_m() const override {
    return Config::kSwapAB ? cute::size<1>(typename Kernel::TileShape{})
                           : cute::size<0>(typename Kernel::TileShape{});
  }
  int tile_n() const override {
    return Config::kSwapAB ? cute::size<0>(typename Kernel::TileShape{})
                           : cute::size<1>(typename Kernel::TileShape{});
  }

 private:
  static typename Adapter::Arguments make_arguments(const GemmArguments& g,
                                                    const TileStore* store) {
    auto arguments = gemm_arguments<Kernel, Config::kSwapAB, !Config::kTileStore>(g);
    if constexpr (Config::kTileStore) {
      arguments.epilogue.d = static_cast<ElementD*>(g.d);
      arguments.epilogue.ldd = g.ldd ? g.ldd : g.n;
      if (store != nullptr) arguments.epilogue.store = *store;
    }
    return arguments;
  }

  Adapter op_;
  // Stream-K kernels only: what run() clears before each launch.
  typename Adapter::Arguments stream_k_arguments_{};
  void* stream_k_workspace_ = nullptr;
};

}  // namespace iris::ops::detail
