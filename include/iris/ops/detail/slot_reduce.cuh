// The receiving side of the tile-store routes that send partial tiles into per-source slots:
// a reduction kernel that waits per tile for every source and adds the slots in team order, the
// two one-block kernels that keep a run from overwriting a slot its reader still reads, the
// layout of their counters and the host side that sets them up and launches one run.
// Not public. Used by GemmAllReduce's one-shot pattern (every tile of C from every member) and
// GemmReduceScatter's fused pattern (the tiles of this rank's row block from every member); the
// team-order sum and the reuse protocol also by the producer-consumer patterns (pull_reduce.cuh).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "iris/device/context.hpp"
#include "iris/device/coop.hpp"
#include "iris/device/signal.hpp"
#include "iris/device/team.hpp"
#include "iris/host/error.hpp"
#include "iris/ops/detail/comm_op.hpp"
#include "iris/ops/detail/gemm_runner.hpp"

namespace iris::ops::detail {

constexpr unsigned kSlotReduceThreads = 256;

/// Rows of the tile-store kernel's CTA tile, without a GPU (the runner only names its shape).
inline int store_tile_m() {
  static const int rows = make_tile_store_gemm_bf16()->tile_m();
  return rows;
}

/// The reduced matrix and the partials of it that every source stored here; the same shape on
/// every member.
template <class Element>
struct SlotGrid {
  const Element* slots = nullptr;  // [sources][rows x n]: source q's partial at q * slot
  Element* out = nullptr;          // rows x n
  int rows = 0, n = 0;             // n: a multiple of 16 bytes of Element
  std::int64_t slot = 0;           // rows * n
  int tile_m = 0, tile_n = 0, tiles_n = 0, tiles = 0;
};

/// The grid of `out` (rows x n) and its `slots`, one of rows x n per source, tiled by `count`.
template <class Element>
SlotGrid<Element> slot_grid(const Element* slots, Element* out, int rows, int n,
                            const TileCount& count) {
  SlotGrid<Element> grid{};
  grid.slots = slots;
  grid.out = out;
  grid.rows = rows;
  grid.n = n;
  grid.slot = std::int64_t{rows} * n;
  grid.tile_m = count.tile_m;
  grid.tile_n = count.tile_n;
  grid.tiles_n = count.tiles_n;
  grid.tiles = count.tiles;
  return grid;
}

/// The counters of one slot reduction, in one zeroed symmetric buffer of count(sources, tiles):
/// [arrivals: sources * tiles][done: tiles][freed: sources][runs: 1]. Source q's tiles raise
/// arrivals[q * tiles + t] on the receiver.
struct SlotFlags {
  std::uint64_t* base = nullptr;
  int sources = 0, tiles = 0;

  static std::size_t count(int sources, int tiles) {
    return std::size_t(sources + 1) * tiles + sources + 1;
  }
  std::uint64_t* arrivals() const { return base; }
  std::uint64_t* done() const { return base + std::int64_t{sources} * tiles; }
  std::uint64_t* freed() const { return done() + tiles; }
  std::uint64_t* runs() const { return freed() + sources; }
};

/// bf16 elements in one 16-byte unit: what the reductions load and store at a time.
constexpr int kUnit = 8;
/// Units one thread loads before it adds them, so that they are all in flight together.
constexpr int kUnitsInFlight = 8;

/// The sum of `sources` units of 8 bf16, source q's unit at unit_at(q): loaded kUnitsInFlight at
/// a time (every load of a batch in flight together, whichever member or slot it reads), added
/// in fp32 in the order q = 0, 1, ... starting from 0, and rounded to bf16 once. Every
/// reduction of the row-parallel ops adds this way, so that all their patterns give the same
/// bits.
template <class UnitAt>
__device__ __forceinline__ uint4 sum_in_team_order(int sources, UnitAt unit_at) {
  float sum[kUnit] = {};
  for (int q0 = 0; q0 < sources; q0 += kUnitsInFlight) {
    uint4 units[kUnitsInFlight] = {};
#pragma unroll
    for (int b = 0; b < kUnitsInFlight; ++b)
      if (q0 + b < sources) units[b] = *reinterpret_cast<const uint4*>(unit_at(q0 + b));
#pragma unroll
    for (int b = 0; b < kUnitsInFlight; ++b) {
      if (q0 + b >= sources) break;
      const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(&units[b]);
#pragma unroll
      for (int e = 0; e < kUnit / 2; ++e) {
        const float2 f = __bfloat1622float2(pairs[e]);
        sum[2 * e] += f.x;
        sum[2 * e + 1] += f.y;
      }
    }
  }
  uint4 packed_unit;
  auto* packed = reinterpret_cast<__nv_bfloat162*>(&packed_unit);
#pragma unroll
  for (int e = 0; e < kUnit / 2; ++e) packed[e] = __floats2bfloat162_rn(sum[2 * e], sum[2 * e + 1]);
  return packed_unit;
}

/// One block per tile (grid-stride). The tile's run counter `done` (this rank's; only this
/// kernel touches it) gives the run's number; the block waits (bounded) until every source's
/// partial tile of this run arrived (arrivals[q * tiles + t] >= done + 1), adds the sources in
/// team order in fp32 and stores the sum, rounded once. bf16 only (16-byte units of 8).
template <class Element>
__global__ void __launch_bounds__(kSlotReduceThreads)
    reduce_slot_tiles(const __grid_constant__ iris::device::Context ctx, int sources,
                      SlotGrid<Element> grid, const std::uint64_t* arrivals, std::uint64_t* done) {
  static_assert(sizeof(Element) == 2, "bf16 units of 8");
  const iris::block block{};
  __shared__ std::uint64_t target;
  for (int t = blockIdx.x; t < grid.tiles; t += gridDim.x) {
    if (block.thread_rank() == 0) target = done[t] + 1;
    block.sync();
    for (int q = 0; q < sources; ++q)
      iris::device::wait_until(block, ctx, arrivals + std::int64_t{q} * grid.tiles + t,
                               iris::cmp::ge, target);
    const int i = t / grid.tiles_n, j = t % grid.tiles_n;
    const int rows = min(grid.tile_m, grid.rows - i * grid.tile_m);
    const int units_per_row = min(grid.tile_n, grid.n - j * grid.tile_n) / kUnit;
    for (int u = block.thread_rank(); u < rows * units_per_row; u += block.num_threads()) {
      const int r = u / units_per_row, cu = u % units_per_row;
      const std::int64_t at =
          std::int64_t{i * grid.tile_m + r} * grid.n + j * grid.tile_n + cu * kUnit;
      *reinterpret_cast<uint4*>(grid.out + at) =
          sum_in_team_order(sources, [&](int q) { return grid.slots + q * grid.slot + at; });
    }
    block.sync();  // every read of the slots and every use of `target` is done
    if (block.thread_rank() == 0) done[t] = target;
  }
}

// The reuse protocol of the row-parallel ops, whose members read buffers that other members
// write run after run (the fused patterns' slots, producer-consumer's partial products): a run
// writes a member's buffer only once that member has said, with freed, that it finished
// reading it in the previous run. freed[o] on rank r counts the runs in which member o
// finished reading what r wrote for it; runs counts this rank's runs.

/// Before a run writes what the members read: waits (bounded) until every member has finished
/// reading what this rank wrote in the previous runs, freed[o] >= runs so far (kept in `runs`,
/// this rank's own counter), then counts this run.
template <class Flag>
__global__ void wait_until_freed(const __grid_constant__ iris::device::Context ctx, int members,
                                 const Flag* freed, Flag* runs) {
  __shared__ Flag previous;
  if (threadIdx.x == 0) previous = *runs;
  __syncthreads();
  for (int o = threadIdx.x; o < members; o += blockDim.x)
    iris::device::wait_until(ctx, freed + o, iris::cmp::ge, previous);
  __syncthreads();
  if (threadIdx.x == 0) *runs = previous + 1;
}

/// After this rank's reads of the run (stream-ordered, so every read is done): tells every
/// member that what it wrote for this rank may be written again, freed[me] += 1 on each
/// (release, system scope).
template <class Flag>
__global__ void announce_freed(const __grid_constant__ iris::device::Context ctx, iris::team team,
                               int me, Flag* freed) {
  for (int q = threadIdx.x; q < team.size; q += blockDim.x)
    iris::device::signal_add(ctx, freed + me, Flag{1}, team.world_rank(q));
}

/// One run under the reuse protocol, stream-ordered on `stream`: wait_until_freed (which counts
/// the run in *runs before anything `enqueue` queues), enqueue() (the run's work, which may fork
/// from and join back to `stream`), then announce_freed.
template <class Enqueue>
void run_reusing(const iris::device::Context& ctx, const iris::team& team, int me,
                 std::uint64_t* freed, std::uint64_t* runs, cudaStream_t stream,
                 Enqueue&& enqueue) {
  wait_until_freed<<<1, 32, 0, stream>>>(ctx, team.size, freed, runs);
  IRIS_CUDA_CHECK(cudaGetLastError());
  enqueue();
  announce_freed<<<1, 32, 0, stream>>>(ctx, team, me, freed);
  IRIS_CUDA_CHECK(cudaGetLastError());
}

/// The tile-store route of member `me` of `team` into the slots: every tile's arrival raises
/// its flag at arrivals[me * tiles + t] on each receiver, receivers visited after `me`.
inline TileStore slot_store(const iris::device::Context& ctx, const iris::team& team, int me,
                            const SlotFlags& flags, const TraceBuffer& trace) {
  TileStore tiles{};
  tiles.ctx = ctx;
  tiles.receivers = team;
  tiles.flags = flags.arrivals();
  tiles.flag_offset = std::int64_t{me} * flags.tiles;
  tiles.first_receiver = me;
  tiles.trace = trace;
  return tiles;
}

/// One run, stream-ordered: wait until every member has read this rank's slots of the previous
/// run, `gemm` (the tile-store GEMM that fills the members' slots), the reduction in `blocks`
/// blocks, then tell every member its slot here is free.
template <class Element>
void run_slot_reduction(const iris::device::Context& ctx, const iris::team& team, int me,
                        const SlotGrid<Element>& grid, const SlotFlags& flags, int blocks,
                        GemmRunner& gemm, cudaStream_t stream) {
  run_reusing(ctx, team, me, flags.freed(), flags.runs(), stream, [&] {
    gemm.run(stream);
    reduce_slot_tiles<<<blocks, kSlotReduceThreads, 0, stream>>>(ctx, team.size, grid,
                                                                 flags.arrivals(), flags.done());
    IRIS_CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace iris::ops::detail
