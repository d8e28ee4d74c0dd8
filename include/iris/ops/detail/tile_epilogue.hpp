// The tile-store epilogue: a CUTLASS 3.x collective epilogue (the interface of CUTLASS's
// DefaultEpilogue, run by the SM90 warp-specialized kernels through
// Sm90TmaWarpSpecializedAdapter) that sends each finished output tile to any set of ranks and
// raises a per-tile flag on each of them. Not public; docs/ops.md describes it.
//
// Per tile, the two consumer warpgroups (256 threads) of the cooperative kernel:
//   1. convert the fp32 accumulators and write them to a shared-memory tile, one column pass
//      (BLK_M, kPassCols) at a time;
//   2. load the pass into registers as 16-byte units (row-contiguous: coalesced, whole NVLink
//      payloads), sync (shared memory is free again), translate the tile's address once per
//      receiver and store the units there;
//   3. one thread adds 1 to every receiver's copy of the tile's flag with release at system
//      scope (the put + signal_add completion protocol), not at once but after the next sync of
//      the group, in the CTA's next tile's epilogue (or in store_tail after its last tile): by
//      then the tile's stores have long drained, so the release waits for nothing, while a
//      release right after the stores would hold both warpgroups until every store had landed,
//      once per tile. A flag thus rises one mainloop later than its tile's stores, and every
//      flag has risen when the kernel ends.
// A receiver that acquires flag >= runs sees the whole tile.
// The route (TileStore, a run-time parameter of the one kernel): every tile to every receiver
// (all-scatter), or each tile only to the owner of its rows, into the sender's slot there
// (reduce-scatter).
#pragma once

#include <cuda/std/utility>
#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/arch/barrier.h"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/detail.hpp"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/numeric_conversion.h"
#include "iris/device/context.hpp"
#include "iris/device/signal.hpp"
#include "iris/ops/detail/gemm_runner.hpp"
#include "iris/ops/detail/trace_record.hpp"

namespace iris::ops::detail {

/// The consumer warpgroups of CUTLASS's SM90 cooperative kernel as an Iris cooperative group:
/// threads 128..383 of the block (warpgroup 0 is the producer), synchronised on CUTLASS's
/// epilogue named barrier, which no other part of the kernel uses once this epilogue replaces
/// the TMA epilogue.
struct consumer_warpgroups {
  static constexpr unsigned kProducerThreads = 128;
  __device__ static constexpr unsigned num_threads() { return 256; }
  __device__ static unsigned thread_rank() { return threadIdx.x - kProducerThreads; }
  __device__ static void sync() {
    cutlass::arch::NamedBarrier::sync(num_threads(),
                                      cutlass::arch::ReservedNamedBarriers::EpilogueBarrier);
  }
};

__device__ __forceinline__ int imin(int a, int b) {
  return a < b ? a : b;
}

template <class ElementD_, class TileShape_, int kPasses_>
class TileStoreEpilogue {
 public:
  using ElementD = ElementD_;
  using ElementAccumulator = float;
  using ElementCompute = float;
  using ElementOutput = ElementD;
  using ElementC = void;
  using StrideC = cute::Stride<std::int64_t, cute::Int<1>, std::int64_t>;
  using StrideD = StrideC;
  using GmemTiledCopyC = void;
  using GmemTiledCopyD = void;
  using TileShape = TileShape_;
  using EpilogueSchedule = void;
  /// Named for GemmUniversalAdapter's type list only: this epilogue applies no alpha/beta.
  using ThreadEpilogueOp = cutlass::epilogue::thread::LinearCombination<ElementD, 1, float, float>;

  static constexpr int kBlockM = cute::size<0>(TileShape{});
  static constexpr int kBlockN = cute::size<1>(TileShape{});
  static constexpr int kPasses = kPasses_;
  static_assert(kBlockN % kPasses == 0, "the column passes must split BLK_N evenly");
  static constexpr int kPassCols = kBlockN / kPasses;
  /// Padding of 16 bytes per row spreads a thread quad's rows over all 32 banks.
  static constexpr int kSmemCols = kPassCols + 16 / static_cast<int>(sizeof(ElementD));

  struct SharedStorage {
    alignas(128) ElementD tile[kBlockM * kSmemCols];  // (BLK_M, kPassCols), padded rows
  };
  using TensorStorage = SharedStorage;

  struct Arguments {
    ElementD* d = nullptr;  ///< this rank's copy of D (symmetric when receivers are peers)
    std::int64_t ldd = 0;
    TileStore store{};
  };
  using Params = Arguments;

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const&, Arguments const& args,
                                                  void*) {
    return args;
  }
  template <class ProblemShape>
  static std::size_t get_workspace_size(ProblemShape const&, Arguments const&) {
    return 0;
  }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*,
                                              cudaStream_t, cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const& problem, Arguments const& args) {
    const auto n = cute::get<1>(problem);
    return args.d != nullptr && (n * sizeof(ElementD)) % 16 == 0 &&
           (args.ldd * sizeof(ElementD)) % 16 == 0 && args.store.receivers.size >= 1;
  }

  CUTLASS_HOST_DEVICE TileStoreEpilogue(Params const& params, SharedStorage const& = {})
      : params_(params) {
#if defined(__CUDA_ARCH__)
    if (params.store.trace.events != nullptr) last_end_ = trace_clock();
#endif
  }

  CUTLASS_DEVICE bool is_source_needed() { return false; }

  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine,
            class FrgLayout, class TiledMma, class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL problem_shape_mnkl, BlockShapeMNK blk_shape_MNK,
                                 BlockCoordMNKL blk_coord_mnkl,
                                 cute::Tensor<FrgEngine, FrgLayout> const& accumulators,
                                 TiledMma tiled_mma, ResidueMNK, int thread_idx, char* smem) {
    using namespace cute;
    static_assert(size<0>(BlockShapeMNK{}) == kBlockM && size<1>(BlockShapeMNK{}) == kBlockN,
                  "the epilogue's tile is the kernel's CTA tile");
    const consumer_warpgroups group{};
    const TileStore& store = params_.store;
    const int m = static_cast<int>(get<0>(problem_shape_mnkl));
    const int n = static_cast<int>(get<1>(problem_shape_mnkl));
    const int tile_m = static_cast<int>(get<0>(blk_coord_mnkl));
    const int tile_n = static_cast<int>(get<1>(blk_coord_mnkl));
    const int m0 = tile_m * kBlockM, n0 = tile_n * kBlockN;
    const int rows = imin(kBlockM, m - m0);
    const int cols = imin(kBlockN, n - n0);
    // The scheduler rounds the tile grid up to whole clusters: such a tile lies wholly outside
    // D and has no flag. All 256 threads take this branch together.
    if (rows <= 0 || cols <= 0) return;
    const int tiles_n = (n + kBlockN - 1) / kBlockN;
    const int tile = tile_m * tiles_n + tile_n;  // in the whole of D (trace events)
    // The route (TileStore): receivers j = 1..count are team indices (first + j) % size; the
    // tile's corner in D and its flag's index.
    int first = store.first_receiver, count = store.receivers.size, flag_tile = tile;
    std::int64_t corner = static_cast<std::int64_t>(m0) * params_.ldd + n0;
    if (store.owner_rows > 0) {  // reduce-scatter: only to the owner of the tile's rows
      const int owner = m0 / store.owner_rows;
      const int local_m0 = m0 - owner * store.owner_rows;
      first = owner + store.receivers.size - 1;
      count = 1;
      flag_tile = (local_m0 / kBlockM) * tiles_n + tile_n;
      corner = store.slot_offset + static_cast<std::int64_t>(local_m0) * params_.ldd + n0;
    }
    const bool tracing = store.trace.events != nullptr && group.thread_rank() == 0;
    const std::uint64_t epilogue_start = tracing ? trace_clock() : 0;
    if (tracing)
      trace_record(store.trace, TraceKind::kGemmTile, store.ctx.rank(), tile, last_end_,
                   epilogue_start);

    // Tile coordinates of this thread's accumulators.
    Tensor coords = make_identity_tensor(make_shape(Int<kBlockM>{}, Int<kBlockN>{}));
    Tensor thread_coords = tiled_mma.get_thread_slice(thread_idx).partition_C(coords);
    static_assert(decltype(size(thread_coords))::value == decltype(size(accumulators))::value,
                  "one coordinate per accumulator");
    ElementD* staged = reinterpret_cast<SharedStorage*>(smem)->tile;
    ElementD* tile_d = params_.d + corner;

    // Which accumulators a column pass takes is known at compile time. Each consumer warpgroup
    // holds one wgmma atom of 64 x BLK_N, whose C fragment is (2, 2, BLK_N / 8) values per
    // thread: a column pair, a row 8 below, the group of 8 columns. Accumulator i thus sits at
    // column 2 * (lane % 4) + i % 2 + 8 * (i / 4), and the kPerPass accumulators from
    // pass * kPerPass on are exactly the pass's columns, with i and i + 1 (i even) one row's two
    // adjacent columns: one 4-byte pair in shared memory. (A run-time test of every accumulator's
    // column on every pass cost more instructions than the rest of the epilogue.)
    static_assert(std::is_same_v<cute::remove_cvref_t<decltype(shape(accumulators))>,
                                 cute::remove_cvref_t<decltype(make_shape(
                                     make_shape(_2{}, _2{}, Int<kBlockN / 8>{}), _1{}, _1{}))>>,
                  "the epilogue expects one 64 x BLK_N wgmma atom per consumer warpgroup");
    static_assert(sizeof(ElementD) == 2, "pairs of 16-bit outputs are 4-byte shared stores");
    constexpr int kPerPass = decltype(size(accumulators))::value / kPasses;
    static_assert(kPassCols % 8 == 0 && kPerPass % 2 == 0, "whole column groups per pass");
    using Pair = cutlass::Array<ElementD, 2>;
    cutlass::NumericArrayConverter<ElementD, float, 2> convert;

    // Each thread moves kUnits 16-byte units per pass: all loaded from shared memory first, then
    // stored to every receiver, so a thread keeps kUnits stores in flight per receiver.
    constexpr int kElementsPerUnit = 16 / static_cast<int>(sizeof(ElementD));
    constexpr int kUnitsPerRow = kPassCols / kElementsPerUnit;
    constexpr int kUnits =
        kBlockM * kUnitsPerRow / static_cast<int>(consumer_warpgroups::num_threads());
    static_assert(kBlockM * kUnitsPerRow % consumer_warpgroups::num_threads() == 0,
                  "whole units per thread");

    cute::for_each(cute::make_int_sequence<kPasses>{}, [&](auto pass_index) {
      constexpr int pass = decltype(pass_index)::value;
      const int c0 = pass * kPassCols;
      const int pass_units = imin(kPassCols, cols - c0) / kElementsPerUnit;  // N % 8 == 0
      if (pass_units <= 0) return;  // the same for every thread (and for every later pass)
      CUTLASS_PRAGMA_UNROLL
      for (int i = pass * kPerPass; i < (pass + 1) * kPerPass; i += 2) {
        const int r = get<0>(thread_coords(i));
        const int c = get<1>(thread_coords(i)) - c0;
        cutlass::Array<float, 2> both;
        both[0] = accumulators(i);
        both[1] = accumulators(i + 1);
        *reinterpret_cast<Pair*>(staged + r * kSmemCols + c) = convert(both);
      }
      group.sync();  // the pass is staged; every thread's stores of the CTA's previous tile precede
      if constexpr (pass == 0) raise_pending();
      uint4 units[kUnits];
      int offsets[kUnits];  // element offset in D from the pass's corner; -1: outside D
      CUTLASS_PRAGMA_UNROLL
      for (int u = 0; u < kUnits; ++u) {
        const int index =
            static_cast<int>(group.thread_rank()) + u * static_cast<int>(group.num_threads());
        const int r = index / kUnitsPerRow, cu = index % kUnitsPerRow;
        const bool inside = r < rows && cu < pass_units;
        offsets[u] = inside ? static_cast<int>(r * params_.ldd) + cu * kElementsPerUnit : -1;
        if (inside)
          units[u] =
              *reinterpret_cast<const uint4*>(staged + r * kSmemCols + cu * kElementsPerUnit);
      }
      group.sync();  // shared memory is free for the next pass while the stores drain
      // Communication: translate the tile once per receiver, then plain 16-byte stores.
      for (int j = 1; j <= count; ++j) {
        const int to = store.receivers.world_rank((first + j) % store.receivers.size);
        ElementD* peer = store.ctx.translate(tile_d + c0, to);
        CUTLASS_PRAGMA_UNROLL
        for (int u = 0; u < kUnits; ++u)
          if (offsets[u] >= 0) *reinterpret_cast<uint4*>(peer + offsets[u]) = units[u];
      }
    });
    // The tile's flags rise after the group's next sync (raise_pending), not here.
    if (group.thread_rank() == 0 && store.flags != nullptr)
      pending_ = {store.flags + store.flag_offset + flag_tile, first, count, tile};
    if (tracing) {
      last_end_ = trace_clock();
      trace_record(store.trace, TraceKind::kStore, store.ctx.rank(), tile, epilogue_start,
                   last_end_);
    }
  }

  /// After the CTA's last tile (Sm90TmaWarpSpecializedAdapter's store_tail, TileStoreCollective
  /// below), every consumer thread: the last tile's flags rise once all its stores are issued.
  CUTLASS_DEVICE void finish() {
    consumer_warpgroups::sync();
    raise_pending();
  }

 private:
  /// Thread 0 of the group, after a sync of the group that follows the stores of the tile whose
  /// flags are pending: adds 1 to each receiver's copy of the flag, release at system scope (the
  /// sync and the release's cumulativity order every thread's stores of the tile before it).
  CUTLASS_DEVICE void raise_pending() {
    if (consumer_warpgroups::thread_rank() != 0 || pending_.flag == nullptr) return;
    const TileStore& store = params_.store;
    for (int j = 1; j <= pending_.count; ++j)
      iris::device::signal_add(
          store.ctx, pending_.flag, std::uint64_t{1},
          store.receivers.world_rank((pending_.first + j) % store.receivers.size));
    if (store.trace.events != nullptr) {
      const std::uint64_t signalled = trace_clock();
      trace_record(store.trace, TraceKind::kSignal, store.ctx.rank(), pending_.tile, signalled,
                   signalled);
    }
    pending_.flag = nullptr;
  }

  /// The flags of the CTA's last stored tile, not yet raised (thread 0 of the group only).
  struct Pending {
    std::uint64_t* flag = nullptr;
    int first = 0, count = 0, tile = 0;
  };

  Params params_;
  Pending pending_{};
  std::uint64_t last_end_ = 0;  // tracing: when this thread's previous tile ended
};

/// The tile-store epilogue as CUTLASS's SM90 warp-specialized kernels run it: CUTLASS's adapter
/// for epilogues without TMA, whose store_tail (called by every consumer thread after the CTA's
/// last tile) here raises the flags of that last tile.
template <class Epilogue>
class TileStoreCollective
    : public cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<Epilogue> {
  using Base = cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<Epilogue>;

 public:
  using Base::Base;

  CUTLASS_DEVICE auto store_tail(typename Base::LoadPipeline,
                                 typename Base::LoadPipelineState load_state,
                                 typename Base::StorePipeline,
                                 typename Base::StorePipelineState store_state) {
    this->finish();
    return cute::make_tuple(load_state, store_state);
  }
};

}  // namespace iris::ops::detail
