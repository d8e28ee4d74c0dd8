// The producer-consumer pattern of the row-parallel ops (GemmReduceScatter, GemmAllReduce), the
// decomposition Flux and PyTorch's async tensor parallelism use: every member's GEMM stores its
// partial product only into its own symmetric M x N buffer (the tile-store kernel with this
// rank as the only receiver) and raises its own flag per tile; a reducer on a second stream,
// beside the GEMM, takes the tiles of the rows its rank produces and, for each, waits for every
// member's flag of that tile (read through the heap), pulls the members' partial tiles and adds
// them in team order (slot_reduce.cuh's sum). The GEMM's epilogue sends nothing over NVLink;
// the reducer's loads do all the communication. Not public.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

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

/// The reducer: one block per tile (grid-stride, in the order the tiles are numbered, which is
/// about the order in which the GEMMs store them). Thread 0 waits until every member's flag of
/// the tile has reached this run's number (*runs, counted before the fork), visiting the
/// members from the one after this rank on, then the block syncs (what thread 0 acquired is
/// visible to every thread) and pulls the members' partial tiles over the heap, a unit from
/// each member in flight at once, adding them in team order.
template <class Element>
__global__ void __launch_bounds__(kSlotReduceThreads)
    pull_partial_tiles(const __grid_constant__ iris::device::Context ctx, iris::team team, int me,
                       PullGrid<Element> grid, const std::uint64_t* ready,
                       const std::uint64_t* runs) {
  static_assert(sizeof(Element) == 2, "bf16 units of 8");
  const iris::block block{};
  const std::uint64_t target = *runs;  // written before the fork, in stream order
  for (int k = blockIdx.x; k < grid.tiles; k += gridDim.x) {
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

/// The pattern's host side, as an op's state keeps it: the reducer's grid and blocks, the
/// counters and the side stream.
template <class Element>
struct PullReduction {
  PullGrid<Element> grid{};
  PullFlags flags{};
  int blocks = 0;
  SideStream side;

  /// Binds `gemm` (the tile-store GEMM) to `partial`, the GEMM of this rank's partial product
  /// into its symmetric M x N partials (partial.d), on local_store's route, and the reducer to
  /// rows [row0, row1) of the members' sum into `out`. The counters come from `counters`,
  /// (re)allocated zeroed: collective over the world, like every symmetric allocation.
  void initialize(Context& ctx, const iris::team& team, GemmRunner& gemm,
                  const GemmArguments& partial, Buffer<std::uint64_t>& counters, Element* out,
                  int row0, int row1, int asked_blocks, const TraceBuffer& trace, void* workspace,
                  cudaStream_t stream) {
    const auto count = TileCount::of(partial.m, partial.n, gemm.tile_m(), gemm.tile_n());
    ensure_zeros(ctx, counters, PullFlags::count(team.size, count.tiles));
    flags = {counters.data(), team.size, count.tiles};
    grid = pull_grid(static_cast<const Element*>(partial.d), out, row0, row1, partial.n, count);
    const auto split = concurrent_split(ctx, grid.tiles, asked_blocks);
    GemmArguments local = partial;
    local.sm_count = split.gemm_sms;
    const TileStore tiles = local_store(ctx.device(), flags, trace);
    gemm.initialize(local, &tiles, workspace, stream);
    blocks = split.blocks;
    side.create();
  }

  /// One run, stream-ordered on `stream`: wait until every member has finished pulling this
  /// rank's partials of the previous run (which counts this run), fork the side stream, `gemm`
  /// on `stream` and the reducer on the side stream, join, then tell every member that this
  /// rank's reads of its partials are over. The GEMM is launched first, so that its CTAs are
  /// placed before the reducer's blocks (concurrent_split leaves SMs for them either way).
  void run(const iris::device::Context& ctx, const iris::team& team, int me, GemmRunner& gemm,
           cudaStream_t stream) {
    run_reusing(ctx, team, me, flags.freed(), flags.runs(), stream, [&] {
      const cudaStream_t reducer = side.fork(stream);
      gemm.run(stream);
      pull_partial_tiles<<<blocks, kSlotReduceThreads, 0, reducer>>>(ctx, team, me, grid,
                                                                     flags.ready(), flags.runs());
      IRIS_CUDA_CHECK(cudaGetLastError());
      side.join(stream);
    });
  }
};

}  // namespace iris::ops::detail
