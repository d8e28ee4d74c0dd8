// What the communicating ops (GemmAllScatter, GemmReduceScatter, GemmAllReduce, AllGatherGemm,
// AllReduceRmsNorm, GemmAllReduceRmsNorm) set up alike: the team and this rank's place in it,
// the GEMM of the op's operands, C's place in the symmetric heap, the tile grid of the flags,
// the symmetric buffers and the communicator kept across initialize() calls, the GPU's SMs and
// the ranks sharing it, the second stream of the producer-consumer patterns and the block split
// of the workgroup-specialized ones.
// Not public; host only, needs no CUTLASS.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <source_location>
#include <string>

#include "iris/ccl/communicator.hpp"
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

/// Copies the GEMM operands (M, N, K, A, B and their leading dimensions) of one op's arguments
/// into another's.
template <class From, class To>
void copy_operands(const From& from, To& to) {
  to.m = from.m;
  to.n = from.n;
  to.k = from.k;
  to.a = from.a;
  to.lda = from.lda;
  to.b = from.b;
  to.ldb = from.ldb;
}

/// The GEMM of rows x cols into `d` (leading dimension ldd) from the op's A and B.
template <class OpArguments>
GemmArguments gemm_of(const OpArguments& a, int cols, void* d, std::int64_t ldd) {
  GemmArguments g{};
  copy_operands(a, g);
  g.n = cols;
  g.d = d;
  g.ldd = ldd;
  return g;
}

/// The partial product A_r * B_r^T, M x N into `d` (packed).
template <class OpArguments>
GemmArguments partial_gemm(const OpArguments& a, void* d) {
  return gemm_of(a, a.n, d, a.n);
}

/// Whether `c` is a symmetric buffer (from the Context's heap) that holds rows x cols elements,
/// as a sentence; `shape` names the extent ("M x N"), `type` the elements. The extent is checked
/// only where `check_extent` (an empty matrix has none).
template <class Element>
Status check_symmetric_c(const Context& ctx, const void* c, const char* shape, std::int64_t rows,
                         std::int64_t cols, bool check_extent, DType type = DType::kBF16) {
  if (c == nullptr || !ctx.contains(c))
    return Status::failure("C must be a symmetric buffer (from the Context's heap) on every rank");
  if (check_extent) {
    const auto* last = static_cast<const Element*>(c) + rows * cols - 1;
    if (!ctx.contains(last))
      return Status::failure(std::string("C must hold ") + shape + " = " + std::to_string(rows) +
                             " x " + std::to_string(cols) + " " + std::string(to_string(type)) +
                             " elements inside the symmetric heap");
  }
  return Status::success();
}

/// The CTA tiles over rows x cols: one flag per tile, numbered row-major.
struct TileCount {
  int tile_m = 0, tile_n = 0, tiles_n = 0, tiles = 0;
  static TileCount of(int rows, int cols, int tile_m, int tile_n) {
    const int tiles_n = (cols + tile_n - 1) / tile_n;
    return {tile_m, tile_n, tiles_n, tiles_n * ((rows + tile_m - 1) / tile_m)};
  }
};

/// A zeroed symmetric buffer of `count` elements (flags, partials, slots), reallocated only when
/// the count changes. Collective over the world like every symmetric allocation (the old buffer
/// is freed, collectively, first).
template <class T>
void ensure_zeros(Context& ctx, Buffer<T>& buffer, std::size_t count,
                  std::source_location where = std::source_location::current()) {
  if (buffer && buffer.size() == count) return;
  buffer = {};
  buffer = ctx.zeros<T>(count, where);
}

/// The op's communicator over `team`, remade only when the team changes. Collective over the
/// world like its construction (the old one is destroyed, collectively, first). By default it
/// has no staging for the ring reduce_scatter, which only GemmReduceScatter's bulk pattern may
/// run (it passes iris::ccl's default options).
inline void ensure_communicator(Context& ctx, std::unique_ptr<iris::ccl::Communicator>& comm,
                                const iris::team& team,
                                const iris::ccl::CommunicatorOptions& options = {
                                    .staging_bytes = 0}) {
  if (comm && comm->team() == team) return;
  comm = {};
  comm = std::make_unique<iris::ccl::Communicator>(ctx, team, options);
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

/// Blocks of a kernel that spins on the members' GEMMs, one tile a block at a time: `asked`
/// where positive, else two per SM, or with ranks sharing this GPU 16 / sharing (all ranks'
/// spinners together must leave SMs free for those GEMMs: a GEMM CTA needs a whole SM); never
/// more than `tiles`.
inline int spinner_blocks(const Context& ctx, int tiles, int asked) {
  const int sharing = ranks_per_gpu(ctx);
  const int blocks = sharing > 1 ? std::max(1, 16 / sharing) : 2 * device_sms();
  return std::min(tiles, asked ? asked : blocks);
}

/// The split of the GPU between a GEMM and a kernel that spins on its tiles at the same time,
/// on another stream (one tile a block at a time). A GEMM CTA needs a whole SM, and the block
/// scheduler may spread the spinning blocks over every SM before the GEMM's CTAs are placed;
/// then the GEMM could never run and the spinners would wait for ever. So the spinners of all
/// ranks on this GPU together stay few: `asked` blocks where positive, else 16 divided among
/// the ranks sharing the GPU (at least 1), never more than `tiles`, and never so many that all
/// sharing ranks' blocks hold every SM but two; the GEMM takes the SMs they leave (at least 2,
/// one 2-CTA cluster).
struct ConcurrentSplit {
  int gemm_sms = 0, blocks = 0;
};
inline ConcurrentSplit concurrent_split(const Context& ctx, int tiles, int asked) {
  const int sharing = ranks_per_gpu(ctx);
  const int sms = device_sms();
  const int most = std::max(1, (sms - 2) / sharing);
  const int blocks = std::max(1, std::min({tiles, most, asked ? asked : 16 / sharing}));
  return {std::max(2, sms - blocks * sharing), blocks};
}

/// The blocks of one workgroup-specialized launch (workgroup_specialized.hpp) that this rank may
/// keep resident: the kernel's `resident` blocks on this GPU divided among the ranks sharing
/// it, in whole clusters of `cluster` blocks, at least two clusters (one for each role).
inline int workgroup_budget(const Context& ctx, int resident, int cluster) {
  return std::max(2 * cluster, resident / ranks_per_gpu(ctx) / cluster * cluster);
}

/// How one workgroup-specialized launch's blocks are divided, in whole clusters, on a GPU of
/// `sms` SMs. Side blocks: `asked_side` rounded up, else about 16 SMs' worth of a whole GPU's
/// `budget` (16 * budget / sms rounded up, at least one cluster, at most half the budget). GEMM
/// blocks: `asked_gemm` rounded down (at least one cluster), else the rest of the budget (at
/// least one cluster). Asked counts may take the grid past the budget: side blocks that only
/// wait for their own launch's GEMM blocks (lower indices, dispatched first) are delayed by
/// that, not stopped.
struct WorkgroupSplit {
  int gemm_blocks = 0, side_blocks = 0;
};
inline WorkgroupSplit workgroup_split(int budget, int cluster, int sms, int asked_gemm,
                                      int asked_side) {
  const auto down = [cluster](int v) { return v / cluster * cluster; };
  const auto up = [cluster](int v) { return (v + cluster - 1) / cluster * cluster; };
  WorkgroupSplit split;
  split.side_blocks = asked_side
                          ? up(asked_side)
                          : std::max(cluster, std::min(up(16 * budget / sms), down(budget / 2)));
  split.gemm_blocks = asked_gemm ? std::max(cluster, down(asked_gemm))
                                 : std::max(cluster, budget - split.side_blocks);
  return split;
}

/// The split of a launch whose side blocks also wait for the members' GEMMs (the pull reducer
/// of GemmReduceScatter and GemmAllReduce): `asked_side` is cut to the budget less one cluster
/// and the GEMM takes the rest, so the grid stays within the budget. Then the grids of all ranks
/// sharing the GPU are resident at once, and no GEMM block waits for an SM that a side block,
/// spinning on another rank's GEMM, holds.
inline WorkgroupSplit resident_workgroup_split(int budget, int cluster, int sms, int asked_side) {
  return workgroup_split(budget, cluster, sms, 0, std::min(asked_side, budget - cluster));
}

/// A second stream of an op, forked from the caller's stream and joined back to it with events:
/// what run() queues on it is ordered after everything queued on the caller's stream before the
/// fork, the caller's stream waits for it at the join, and a CUDA graph capture of the caller's
/// stream takes both in (the fork's event wait draws the side stream into the capture).
class SideStream {
 public:
  SideStream() = default;
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;
  ~SideStream() {
    if (fork_ != nullptr) cudaEventDestroy(fork_);
    if (join_ != nullptr) cudaEventDestroy(join_);
    if (side_ != nullptr) cudaStreamDestroy(side_);
  }
  /// Makes the stream and its events (once; in initialize(), not while a graph is captured).
  void create() {
    if (side_ != nullptr) return;
    IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
    IRIS_CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
    IRIS_CUDA_CHECK(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
  }
  /// The side stream, after everything queued on `stream` so far.
  cudaStream_t fork(cudaStream_t stream) {
    IRIS_CUDA_CHECK(cudaEventRecord(fork_, stream));
    IRIS_CUDA_CHECK(cudaStreamWaitEvent(side_, fork_, 0));
    return side_;
  }
  /// `stream` waits for everything queued on the side stream so far.
  void join(cudaStream_t stream) {
    IRIS_CUDA_CHECK(cudaEventRecord(join_, side_));
    IRIS_CUDA_CHECK(cudaStreamWaitEvent(stream, join_, 0));
  }

 private:
  cudaStream_t side_ = nullptr;
  cudaEvent_t fork_ = nullptr, join_ = nullptr;
};

}  // namespace iris::ops::detail
