// What the communicating GEMM ops (GemmAllScatter, GemmReduceScatter) set up alike: the team
// and this rank's place in it, the tile grid of the flags, the symmetric flag buffer, the
// GPU's SMs and the ranks sharing it. Not public; host only, needs no CUTLASS.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <source_location>
#include <string>

#include "iris/device/team.hpp"
#include "iris/host/context.hpp"
#include "iris/host/error.hpp"
#include "iris/ops/gemm.hpp"

namespace iris::ops::detail {

/// A team argument with size 0 means the whole world.
inline iris::team resolve_team(const Context& ctx, const iris::team& team) {
  return team.size == 0 ? iris::team::world(ctx.world_size()) : team;
}

/// Whether `team` fits the world and holds this rank, as a sentence; `me` gets its index.
inline Status check_membership(const Context& ctx, const iris::team& team, int& me) {
  me = -1;
  if (!team.fits(ctx.world_size()))
    return Status::failure("the team {start " + std::to_string(team.start) + ", size " +
                           std::to_string(team.size) + ", stride " + std::to_string(team.stride) +
                           "} does not fit a world of " + std::to_string(ctx.world_size()) +
                           " ranks");
  me = team.index_of(ctx.rank());
  if (me < 0)
    return Status::failure("rank " + std::to_string(ctx.rank()) + " is not a member of the team");
  return Status::success();
}

/// The GEMM of rows x cols into `d` (leading dimension ldd) from the op's A and B.
template <class OpArguments>
GemmArguments gemm_of(const OpArguments& a, int cols, void* d, std::int64_t ldd) {
  GemmArguments g{};
  g.m = a.m;
  g.n = cols;
  g.k = a.k;
  g.a = a.a;
  g.lda = a.lda;
  g.b = a.b;
  g.ldb = a.ldb;
  g.d = d;
  g.ldd = ldd;
  return g;
}

/// The CTA tiles over rows x cols: one flag per tile, numbered row-major.
struct TileCount {
  int tile_m = 0, tile_n = 0, tiles_n = 0, tiles = 0;
  static TileCount of(int rows, int cols, int tile_m, int tile_n) {
    const int tiles_n = (cols + tile_n - 1) / tile_n;
    return {tile_m, tile_n, tiles_n, tiles_n * ((rows + tile_m - 1) / tile_m)};
  }
};

/// Zeroed symmetric counters, reallocated only when the count changes. Collective over the
/// world like every symmetric allocation (the old buffer is freed, collectively, first).
inline void ensure_flags(Context& ctx, Buffer<std::uint64_t>& flags, std::size_t count,
                         std::source_location where = std::source_location::current()) {
  if (flags && flags.size() == count) return;
  flags = {};
  flags = ctx.zeros<std::uint64_t>(count, where);
}

/// The current GPU's SMs.
inline int device_sms() {
  int device = 0, sms = 0;
  IRIS_CUDA_CHECK(cudaGetDevice(&device));
  IRIS_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

/// Ranks of this node that share this rank's GPU (at least 1): kernels that spin on a GEMM
/// size themselves by it, so that all ranks' spinners together leave SMs for the GEMMs.
inline int ranks_per_gpu(const Context& ctx) {
  int devices = 1;
  IRIS_CUDA_CHECK(cudaGetDeviceCount(&devices));
  return std::max(1, (ctx.local_world_size() + devices - 1) / devices);
}

}  // namespace iris::ops::detail
