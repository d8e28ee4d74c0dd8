// The producer-consumer pattern of the row-parallel ops (GemmReduceScatter, GemmAllReduce), the
// decomposition Flux and PyTorch's async tensor parallelism use: every member's GEMM stores its
// partial product only into its own symmetric M x N buffer (the tile-store kernel with this
// rank as the only receiver) and raises its own flag per tile; a reducer on a second stream,
// beside the GEMM, takes the tiles of the rows its rank produces and, for each, waits for every
// member's flag of that tile (read through the heap), pulls the members' partial tiles and adds
// them in team order (slot_reduce.cuh's sum). The GEMM's epilogue sends nothing over NVLink;
// the reducer's loads do all the communication. The workgroup-specialized pattern runs the same
// GEMM route and the same reducer loop (PullTiles) in one launch instead: GEMM blocks and
// reducer blocks (workgroup_specialized.hpp), inside the same reuse protocol. Not public.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "iris/ccl/detail/args.hpp"
#include "iris/device/context.hpp"
#include "iris/device/coop.hpp"
#include "iris/device/detail/ptx.hpp"
#include "iris/device/detail/wait.hpp"
#include "iris/device/team.hpp"
#include "iris/host/context.hpp"
#include "iris/host/error.hpp"
#include "iris/ops/detail/comm_op.hpp"
#include "iris/ops/detail/gemm_runner.hpp"
#include "iris/ops/detail/slot_reduce.cuh"
#include "iris/ops/detail/workgroup_specialized.hpp"

namespace iris::ops::detail {

/// The counters of one pull reduction, in one zeroed symmetric buffer of count(members, tiles):
/// [ready: tiles][freed: members][runs: 1]. ready[t] counts the runs whose GEMM has stored tile
/// t of this rank's partial product (its own epilogue raises it; the members' reducers read it
/// through the heap); freed and runs are the reuse protocol's (slot_reduce.cuh).
struct PullFlags {
  std::uint64_t* base = nullptr;
  int members = 0, tiles = 0;

  static std::size_t count(int members, int tiles) { return std::size_t(tiles) + members + 1; }
  std::uint64_t* ready() const { return base; }
  std::uint64_t* freed() const { return base + tiles; }
  std::uint64_t* runs() const { return freed() + members; }
};

/// What one rank's reducer reads and writes. Every member's partial product is M x N, packed,
/// at the same heap offset (`partials` is this rank's); the reducer produces rows [row0, row1)
/// of their sum into `out` ((row1 - row0) x n, packed), over the tiles of the partials that hold
/// those rows: whole tile rows from first_tile_row on (a tile row may hold rows of two
/// members' blocks; only [row0, row1) of it is summed).
template <class Element>
struct PullGrid {
  const Element* partials = nullptr;
  Element* out = nullptr;
  int row0 = 0, row1 = 0, n = 0;  // n: a multiple of 16 bytes of Element
  int tile_m = 0, tile_n = 0, tiles_n = 0;
  int first_tile_row = 0;
  int tiles = 0;  // tiles that hold rows [row0, row1)
};

/// The grid of rows [row0, row1) of the partials' sum into `out`, the partials (M x n) tiled by
/// `count`.
template <class Element>
PullGrid<Element> pull_grid(const Element* partials, Element* out, int row0, int row1, int n,
                            const TileCount& count) {
  PullGrid<Element> grid{partials, out, row0, row1, n, count.tile_m, count.tile_n, count.tiles_n};
  if (row1 > row0) {
    grid.first_tile_row = row0 / count.tile_m;
    grid.tiles = ((row1 - 1) / count.tile_m - grid.first_tile_row + 1) * count.tiles_n;
  }
  return grid;
}

/// One thread: waits (bounded; acquire at system scope) until world rank `rank`'s copy of
/// `ready` (this rank's address of the flag) reaches `target`. A timeout names the tile and the
/// member: "partial tile 12 of member 3(heap offset ... on rank 3, ge 5) timed out ...".
__device__ inline void await_partial(const iris::device::Context& ctx, const std::uint64_t* ready,
                                     int rank, std::uint64_t target, int tile, int member) {
  namespace dd = iris::device::detail;
  const std::uint64_t* flag = ctx.translate(ready, rank);
  if (dd::ptx<cuda::memory_order_acquire, cuda::thread_scope_system>::load(flag) >= target) return;
  char name[32];
  int at = iris::ccl::detail::append(name, 0, "partial tile ");
  at = iris::ccl::detail::append_number(name, at, static_cast<unsigned>(tile));
  at = iris::ccl::detail::append(name, at, " of member ");
  iris::ccl::detail::append_number(name, at, static_cast<unsigned>(member));
  dd::wait_for<cuda::memory_order_acquire, cuda::thread_scope_system>(ctx, name, flag, rank,
                                                                      iris::cmp::ge, target);
}

/// What one rank's reducer loop needs: a kernel argument (pull_partial_tiles) and the side role
/// of the workgroup-specialized launch (workgroup_specialized.hpp), so trivially copyable.
/// `ready` is this rank's address of the members' PullFlags::ready, `runs` this rank's run
/// counter (PullFlags::runs), written before the loop's launch in stream order.
template <class Element>
struct PullTiles {
  iris::device::Context ctx{};
  iris::team team{};
  int me = 0;  ///< this rank's index in `team`
  PullGrid<Element> grid{};
  const std::uint64_t* ready = nullptr;
  const std::uint64_t* runs = nullptr;

  /// Reducer block `reducer` of `reducers` takes tiles reducer, reducer + reducers, ... (in the
  /// order the tiles are numbered, which is about the order in which the GEMMs store them).
  /// Thread 0 waits until every member's flag of the tile has reached this run's number
  /// (*runs), visiting the members from the one after this rank on, then the block syncs (what
  /// thread 0 acquired is visible to every thread) and pulls the members' partial tiles over the
  /// heap, a unit from each member in flight at once, adding them in team order. Every thread
  /// of the block calls it, with any number of threads; it uses no shared memory.
  __device__ void operator()(int reducer, int reducers) const;
};

template <class Element>
__device__ void PullTiles<Element>::operator()(int reducer, int reducers) const {
  static_assert(sizeof(Element) == 2, "bf16 units of 8");
  const iris::block block{};
  const std::uint64_t target = *runs;  // written before this launch, in stream order
  for (int k = reducer; k < grid.tiles; k += reducers) {
    const int i = grid.first_tile_row + k / grid.tiles_n, j = k % grid.tiles_n;
    const int t = i * grid.tiles_n + j;  // in the whole of the partials (the flag's index)
    if (block.thread_rank() == 0)
      for (int d = 1; d <= team.size; ++d) {
        const int q = (me + d) % team.size;
        await_partial(ctx, ready + t, team.world_rank(q), target, t, q);
      }
    block.sync();
    const int r0 = max(i * grid.tile_m, grid.row0);
    const int rows = min((i + 1) * grid.tile_m, grid.row1) - r0;
    const int units_per_row = min(grid.tile_n, grid.n - j * grid.tile_n) / kUnit;
    for (int u = block.thread_rank(); u < rows * units_per_row; u += block.num_threads()) {
      const int r = r0 + u / units_per_row, cu = u % units_per_row;
      const std::int64_t at = std::int64_t{r} * grid.n + j * grid.tile_n + cu * kUnit;
      *reinterpret_cast<uint4*>(grid.out + (at - std::int64_t{grid.row0} * grid.n)) =
          sum_in_team_order(team.size, [&](int q) {
            return ctx.translate(grid.partials + at, team.world_rank(q));
          });
    }
  }
}

/// The producer-consumer reducer: one block per tile (grid-stride), on the side stream.
template <class Element>
__global__ void __launch_bounds__(kSlotReduceThreads)
    pull_partial_tiles(const __grid_constant__ PullTiles<Element> pull) {
  pull(static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x));
}

/// The workgroup-specialized GEMM + pull kernel, bf16 -> bf16 (src/ops/gemm_pull_ws_bf16.cu):
/// the tile-store GEMM on local_store's route and PullTiles as its side role, in one launch.
std::unique_ptr<WorkgroupSpecializedGemm<PullTiles<__nv_bfloat16>>> make_gemm_and_pull_bf16();

/// The tile-store route of the producer-consumer GEMM: each tile only to this rank, at its own
/// place in D (the partials), raising ready[t] here (release, system scope).
inline TileStore local_store(const iris::device::Context& ctx, const PullFlags& flags,
                             const TraceBuffer& trace) {
  TileStore tiles{};
  tiles.ctx = ctx;
  tiles.receivers = iris::team{ctx.rank(), 1, 1};
  tiles.flags = flags.ready();
  tiles.trace = trace;
  return tiles;
}

/// How the reducer runs beside this rank's GEMM.
enum class PullLaunch {
  /// Producer-consumer: the tile-store GEMM on the caller's stream, the reducer kernel
  /// (pull_partial_tiles) on a second stream forked from it and joined back.
  kSideStream,
  /// Workgroup-specialized: one launch (make_gemm_and_pull_bf16) whose GEMM blocks store the
  /// tiles and whose other blocks run the reducer's loop.
  kWorkgroupSpecialized,
};

/// Whether an op's `pattern` (ReduceScatterPattern, AllReducePattern) is one of the two that pull
/// the members' partials (PullReduction), and how that one launches.
template <class Pattern>
bool pulls(Pattern pattern) {
  return pattern == Pattern::kProducerConsumer || pattern == Pattern::kWorkgroupSpecialized;
}
template <class Pattern>
PullLaunch pull_launch(Pattern pattern) {
  return pattern == Pattern::kWorkgroupSpecialized ? PullLaunch::kWorkgroupSpecialized
                                                   : PullLaunch::kSideStream;
}

/// The pattern's host side, as an op's state keeps it: this rank's GEMM (the tile-store GEMM
/// and the side stream, or the one workgroup-specialized launch), the reducer's grid and
/// blocks, and the counters. bf16: the kernels compiled for it.
template <class Element>
struct PullReduction {
  static_assert(std::is_same_v<Element, __nv_bfloat16>, "the pull's kernels are compiled for bf16");
  PullGrid<Element> grid{};
  PullFlags flags{};
  int blocks = 0;                    ///< the reducer's
  std::unique_ptr<GemmRunner> gemm;  ///< kSideStream: the tile-store GEMM
  SideStream side;                   ///< kSideStream: the reducer's stream
  std::unique_ptr<WorkgroupSpecializedGemm<PullTiles<Element>>> launch;  ///< kWorkgroupSpecialized

  /// Binds this rank's GEMM, `partial` (its partial product into its symmetric M x N partials,
  /// partial.d), on local_store's route, and the reducer to rows [row0, row1) of the members'
  /// sum into `out`, launched `how`. The counters come from `counters`, (re)allocated zeroed:
  /// collective over the world, like every symmetric allocation. The reducer's blocks:
  ///   kSideStream: concurrent_split (`asked_blocks` or few, the GEMM on the SMs they leave);
  ///   kWorkgroupSpecialized: resident_workgroup_split within this rank's workgroup_budget
  ///     (`asked_blocks` rounded up to whole clusters, at most the budget less one cluster, or
  ///     the default; the GEMM the rest): the reducer blocks wait for the members' GEMMs, so
  ///     the grids of all ranks sharing the GPU must be resident at once.
  /// Throws iris::Error(kInvalidArgument) where CUTLASS rejects the problem.
  void initialize(Context& ctx, const iris::team& team, PullLaunch how,
                  const GemmArguments& partial, Buffer<std::uint64_t>& counters, Element* out,
                  int row0, int row1, int asked_blocks, const TraceBuffer& trace, void* workspace,
                  cudaStream_t stream) {
    gemm = {};
    launch = {};
    if (how == PullLaunch::kWorkgroupSpecialized)
      launch = make_gemm_and_pull_bf16();
    else
      gemm = make_tile_store_gemm_bf16();
    // Before the collective allocation below: every member refuses alike, or none does.
    if (auto status = launch ? launch->can_implement(partial) : Status::success(); !status)
      throw Error(Errc::kInvalidArgument, "the workgroup-specialized GEMM: " + status.message);
    const auto count =
        TileCount::of(partial.m, partial.n, launch ? launch->tile_m() : gemm->tile_m(),
                      launch ? launch->tile_n() : gemm->tile_n());
    ensure_zeros(ctx, counters, PullFlags::count(team.size, count.tiles));
    flags = {counters.data(), team.size, count.tiles};
    grid = pull_grid(static_cast<const Element*>(partial.d), out, row0, row1, partial.n, count);
    const TileStore tiles = local_store(ctx.device(), flags, trace);
    if (launch) {
      const int cluster = launch->cluster_size();
      const auto split =
          resident_workgroup_split(workgroup_budget(ctx, launch->max_resident_blocks(), cluster),
                                   cluster, device_sms(), asked_blocks);
      launch->initialize(partial, tiles, loop(ctx.device(), team, team.index_of(ctx.rank())),
                         split.gemm_blocks, split.side_blocks);
      blocks = split.side_blocks;
      return;
    }
    const auto split = concurrent_split(ctx, grid.tiles, asked_blocks);
    GemmArguments local = partial;
    local.sm_count = split.gemm_sms;
    gemm->initialize(local, &tiles, workspace, stream);
    blocks = split.blocks;
    side.create();
  }

  /// Whether initialize() has bound a GEMM.
  bool bound() const { return gemm || launch; }

  /// The reducer's loop of member `me` of `team`.
  PullTiles<Element> loop(const iris::device::Context& ctx, const iris::team& team, int me) const {
    return {ctx, team, me, grid, flags.ready(), flags.runs()};
  }

  /// One run, stream-ordered on `stream`, inside run_reusing: wait until every member has
  /// finished pulling this rank's partials of the previous run (which counts this run), then
  /// either fork the side stream, the GEMM on `stream` and the reducer on the side stream, join
  /// (kSideStream: the GEMM is launched first, so that its CTAs are placed before the reducer's
  /// blocks; concurrent_split leaves SMs for them either way), or the one launch
  /// (kWorkgroupSpecialized); then tell every member that this rank's reads of its partials are
  /// over.
  void run(const iris::device::Context& ctx, const iris::team& team, int me, cudaStream_t stream) {
    run_reusing(ctx, team, me, flags.freed(), flags.runs(), stream, [&] {
      if (launch) {
        launch->run(stream);
        return;
      }
      const cudaStream_t reducer = side.fork(stream);
      gemm->run(stream);
      pull_partial_tiles<<<blocks, kSlotReduceThreads, 0, reducer>>>(loop(ctx, team, me));
      IRIS_CUDA_CHECK(cudaGetLastError());
      side.join(stream);
    });
  }
};

}  // namespace iris::ops::detail
