// The send loop of GEMM + all-scatter's producer-consumer and workgroup-specialized patterns:
// a block waits for one of this rank's finished tiles of C (its local flag, raised by the GEMM's
// tile-store epilogue) and pushes it to every other member. Not public; compiled by
// src/ops/gemm_all_scatter.cu (a kernel of its own) and by the workgroup-specialized kernels'
// translation units (the side role of the blocks that do not compute).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "iris/device/context.hpp"
#include "iris/device/rma.hpp"
#include "iris/device/signal.hpp"
#include "iris/device/team.hpp"
#include "iris/ops/detail/trace_record.hpp"

namespace iris::ops::detail {

/// Where C's tiles are and how they are counted; the same on every member.
struct TileGrid {
  __nv_bfloat16* c = nullptr;                          // this rank's copy of the whole C
  int m = 0, n = 0;                                    // rows, columns of one member's block
  std::int64_t ldc = 0;                                // n * team.size
  int tile_m = 0, tile_n = 0, tiles_n = 0, tiles = 0;  // tiles: per block
};

/// What a sender needs: this rank's tiles go to every other member of `team` with put +
/// signal_add on the receiver's arrival flag; its own arrival flag is raised last. With
/// `ready`, each tile is first awaited on its local flag (raised by the GEMM's epilogue), which
/// is then cleared for the next run (the sender is its only reader, and the next run's GEMM is
/// stream-ordered after this run's senders).
struct SendTiles {
  iris::device::Context ctx{};
  iris::team team{};
  int me = 0;  ///< this rank's index in `team`
  TileGrid grid{};
  std::uint64_t* arrivals = nullptr;  ///< [team.size][tiles], symmetric
  std::uint64_t* ready = nullptr;     ///< [tiles], this rank's; null: tiles are already there
  TraceBuffer trace{};

  /// Sender `sender` of `senders` takes tiles sender, sender + senders, ...; every thread of the
  /// block calls it, with any number of threads. It waits only for this rank's own tiles.
  __device__ void operator()(int sender, int senders) const;
};

__device__ inline void SendTiles::operator()(int sender, int senders) const {
  const SendTiles& s = *this;
  const iris::block block{};
  const bool tracing = s.trace.events != nullptr && block.thread_rank() == 0;
  const TileGrid& grid = s.grid;
  __nv_bfloat16* own = grid.c + static_cast<std::int64_t>(s.me) * grid.n;
  for (int t = sender; t < grid.tiles; t += senders) {
    const std::uint64_t wait_start = tracing ? trace_clock() : 0;
    if (s.ready != nullptr) iris::device::wait_until(block, s.ctx, s.ready + t, iris::cmp::ge, 1);
    const std::uint64_t push_start = tracing ? trace_clock() : 0;
    if (tracing && s.ready != nullptr)
      trace_record(s.trace, TraceKind::kWait, s.ctx.rank(), t, wait_start, push_start);
    const int i = t / grid.tiles_n, j = t % grid.tiles_n;
    const int rows = min(grid.tile_m, grid.m - i * grid.tile_m);
    const int cols = min(grid.tile_n, grid.n - j * grid.tile_n);
    __nv_bfloat16* tile =
        own + static_cast<std::int64_t>(i) * grid.tile_m * grid.ldc + j * grid.tile_n;
    const iris::device::tile_view<__nv_bfloat16> view{tile, static_cast<std::size_t>(rows),
                                                      static_cast<std::size_t>(cols),
                                                      static_cast<std::size_t>(grid.ldc)};
    std::uint64_t* flag = s.arrivals + static_cast<std::int64_t>(s.me) * grid.tiles + t;
    for (int q = 1; q < s.team.size; ++q) {
      const int to = s.team.world_rank((s.me + q) % s.team.size);
      iris::device::put(block, s.ctx, view, view, to, iris::device::signal_add(flag, 1));
    }
    block.sync();
    if (block.thread_rank() == 0) {
      iris::device::signal_add(s.ctx, flag, std::uint64_t{1}, s.ctx.rank());
      if (s.ready != nullptr) s.ready[t] = 0;
      if (tracing)
        trace_record(s.trace, TraceKind::kPush, s.ctx.rank(), t, push_start, trace_clock());
    }
  }
}

}  // namespace iris::ops::detail
