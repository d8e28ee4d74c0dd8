// iris::ops::GemmReduceScatter: the host op, the fused pattern's reduction kernel and the two
// one-block kernels that keep a run from overwriting partials an owner still reads.
#include "iris/ops/gemm_reduce_scatter.hpp"

#include <cuda_bf16.h>

#include <algorithm>
#include <string>

#include "iris/ccl/communicator.hpp"
#include "iris/device/signal.hpp"
#include "iris/host/error.hpp"
#include "iris/ops/detail/comm_op.hpp"
#include "iris/ops/detail/gemm_runner.hpp"

namespace iris::ops {

std::string_view to_string(ReduceScatterPattern pattern) noexcept {
  switch (pattern) {
    case ReduceScatterPattern::kAuto:
      return "auto";
    case ReduceScatterPattern::kBulkSynchronous:
      return "bulk_synchronous";
    case ReduceScatterPattern::kFusedSequential:
      return "fused_sequential";
  }
  return "?";
}

namespace detail {

using RsElement = __nv_bfloat16;
constexpr unsigned kReduceThreads = 256;
constexpr int kUnitElements = 8;  // 16 bytes of bf16

/// This rank's rows of C and the partials of them that every member sent; the same shape on
/// every member.
struct ReduceGrid {
  const RsElement* slots = nullptr;  // [team.size][rows x n]: member q's partial rows at q
  RsElement* c = nullptr;            // rows x n
  int rows = 0, n = 0;               // rows = M / team.size
  std::int64_t slot = 0;             // rows * n
  int tile_m = 0, tile_n = 0, tiles_n = 0, tiles = 0;
};

/// One block per tile of this rank's rows (grid-stride). The tile's per-tile run counter `done`
/// (this rank's, only this kernel touches it) gives the run's number; the block waits (bounded)
/// until every member's partial tile of this run arrived, adds them in team order in fp32 and
/// stores the bf16 sum into C.
__global__ void __launch_bounds__(kReduceThreads)
    reduce_tiles(const __grid_constant__ iris::device::Context ctx, int members, ReduceGrid grid,
                 const std::uint64_t* arrivals, std::uint64_t* done) {
  const iris::block block{};
  __shared__ std::uint64_t target;
  for (int t = blockIdx.x; t < grid.tiles; t += gridDim.x) {
    if (block.thread_rank() == 0) target = done[t] + 1;
    block.sync();
    for (int q = 0; q < members; ++q)
      iris::device::wait_until(block, ctx, arrivals + std::int64_t{q} * grid.tiles + t,
                               iris::cmp::ge, target);
    const int i = t / grid.tiles_n, j = t % grid.tiles_n;
    const int rows = min(grid.tile_m, grid.rows - i * grid.tile_m);
    const int units_per_row = min(grid.tile_n, grid.n - j * grid.tile_n) / kUnitElements;
    for (int u = block.thread_rank(); u < rows * units_per_row; u += block.num_threads()) {
      const int r = u / units_per_row, cu = u % units_per_row;
      const std::int64_t at =
          std::int64_t{i * grid.tile_m + r} * grid.n + j * grid.tile_n + cu * kUnitElements;
      float sum[kUnitElements] = {};
      for (int q = 0; q < members; ++q) {
        const uint4 unit = *reinterpret_cast<const uint4*>(grid.slots + q * grid.slot + at);
        const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(&unit);
#pragma unroll
        for (int e = 0; e < kUnitElements / 2; ++e) {
          const float2 f = __bfloat1622float2(pairs[e]);
          sum[2 * e] += f.x;
          sum[2 * e + 1] += f.y;
        }
      }
      uint4 out;
      auto* packed = reinterpret_cast<__nv_bfloat162*>(&out);
#pragma unroll
      for (int e = 0; e < kUnitElements / 2; ++e)
        packed[e] = __floats2bfloat162_rn(sum[2 * e], sum[2 * e + 1]);
      *reinterpret_cast<uint4*>(grid.c + at) = out;
    }
    block.sync();  // every read of the slots and every use of `target` is done
    if (block.thread_rank() == 0) done[t] = target;
  }
}

/// Before a run sends: waits (bounded) until every owner has finished reading this rank's slot
/// of the previous runs, freed[o] >= runs so far (kept in `runs`, this rank's own counter).
__global__ void wait_for_slots(const __grid_constant__ iris::device::Context ctx, int members,
                               const std::uint64_t* freed, std::uint64_t* runs) {
  __shared__ std::uint64_t previous;
  if (threadIdx.x == 0) previous = *runs;
  __syncthreads();
  for (int o = threadIdx.x; o < members; o += blockDim.x)
    iris::device::wait_until(ctx, freed + o, iris::cmp::ge, previous);
  __syncthreads();
  if (threadIdx.x == 0) *runs = previous + 1;
}

/// After this rank's reduction (stream-ordered, so every read of its slots is done): tells every
/// member that its slot here is free, freed[me] += 1 on each (release, system scope).
__global__ void free_slots(const __grid_constant__ iris::device::Context ctx, iris::team team,
                           int me, std::uint64_t* freed) {
  for (int q = threadIdx.x; q < team.size; q += blockDim.x)
    iris::device::signal_add(ctx, freed + me, std::uint64_t{1}, team.world_rank(q));
}

struct ReduceScatterState {
  Context* ctx = nullptr;
  GemmReduceScatterArguments args{};
  iris::team team{};
  int me = 0;
  ReduceScatterPattern pattern = ReduceScatterPattern::kAuto;
  std::unique_ptr<GemmRunner> gemm;
  std::unique_ptr<iris::ccl::Communicator> comm;  // bulk-synchronous only
  iris::team comm_team{};
  ReduceGrid grid{};
  Buffer<RsElement> partials;  // M x N: the slots (fused) or the partial product (bulk)
  // [arrivals: team.size * tiles][done: tiles][freed: team.size][runs: 1]
  Buffer<std::uint64_t> flags;
  int reduce_blocks = 0;
  TraceBuffer trace{};

  std::uint64_t* arrivals() const { return flags.data(); }
  std::uint64_t* done() const { return flags.data() + std::int64_t{team.size} * grid.tiles; }
  std::uint64_t* freed() const { return done() + grid.tiles; }
  std::uint64_t* runs() const { return freed() + team.size; }
};

namespace {
/// The partial product A_r * B_r^T, M x N into `d` (packed).
GemmArguments partial_gemm(const GemmReduceScatterArguments& a, void* d) {
  return gemm_of(a, a.n, d, a.n);
}

/// Rows of the tile-store kernel's CTA tile, without a GPU (the runner only names its shape).
int store_tile_m() {
  static const int rows = make_tile_store_gemm_bf16()->tile_m();
  return rows;
}

ReduceScatterPattern resolve_pattern(ReduceScatterPattern asked, int rows_per_member) {
  if (asked != ReduceScatterPattern::kAuto) return asked;
  // The fused epilogue sends whole tiles to one owner, so it needs row blocks of whole tiles.
  return rows_per_member % store_tile_m() == 0 ? ReduceScatterPattern::kFusedSequential
                                               : ReduceScatterPattern::kBulkSynchronous;
}
}  // namespace

}  // namespace detail

GemmReduceScatter::GemmReduceScatter(Context& ctx)
    : state_(std::make_unique<detail::ReduceScatterState>()) {
  state_->ctx = &ctx;
}
GemmReduceScatter::~GemmReduceScatter() = default;
GemmReduceScatter::GemmReduceScatter(GemmReduceScatter&&) noexcept = default;
GemmReduceScatter& GemmReduceScatter::operator=(GemmReduceScatter&&) noexcept = default;

Status GemmReduceScatter::can_implement(const Context& ctx,
                                        const GemmReduceScatterArguments& args) {
  const iris::team team = detail::resolve_team(ctx, args.team);
  int me = -1;
  if (auto status = detail::check_membership(ctx, team, me); !status) return status;
  if (args.m > 0 && args.m % team.size != 0)
    return Status::failure("M = " + std::to_string(args.m) + " does not split into " +
                           std::to_string(team.size) +
                           " equal row blocks; M must be a multiple of the team size");
  const int rows = args.m / team.size;
  const auto pattern = detail::resolve_pattern(args.pattern, rows);
  if (pattern == ReduceScatterPattern::kFusedSequential && rows % detail::store_tile_m() != 0)
    return Status::failure(
        "the fused pattern sends whole tiles to the owner of their rows: M / team.size = " +
        std::to_string(rows) + " must be a multiple of " + std::to_string(detail::store_tile_m()) +
        " (the GEMM's tile rows); use the bulk-synchronous pattern");
  if (args.c == nullptr || !ctx.contains(args.c))
    return Status::failure("C must be a symmetric buffer (from the Context's heap) on every rank");
  if (args.m > 0 && args.n > 0) {
    const auto* last =
        static_cast<const detail::RsElement*>(args.c) + std::int64_t{rows} * args.n - 1;
    if (!ctx.contains(last))
      return Status::failure("C must hold M / team.size x N = " + std::to_string(rows) + " x " +
                             std::to_string(args.n) + " bf16 elements inside the symmetric heap");
  }
  if (args.reduce_blocks < 0)
    return Status::failure("reduce_blocks must be 0 (choose) or positive");
  // The GEMM writes the packed M x N partials; a stand-in aligned pointer lets Gemm check the
  // rest (the workspace comes from the heap in initialize()).
  return Gemm::can_implement(detail::partial_gemm(args, args.c));
}

std::size_t GemmReduceScatter::workspace_size(const GemmReduceScatterArguments&) {
  return 0;
}

void GemmReduceScatter::initialize(const GemmReduceScatterArguments& args, void* workspace,
                                   cudaStream_t stream) {
  auto& s = *state_;
  Context& ctx = *s.ctx;
  if (auto status = can_implement(ctx, args); !status)
    throw Error(Errc::kInvalidArgument, "iris::ops::GemmReduceScatter: " + status.message);
  s.args = args;
  s.team = detail::resolve_team(ctx, args.team);
  s.me = s.team.index_of(ctx.rank());
  s.trace = args.trace != nullptr ? args.trace->device() : detail::TraceBuffer{};
  const int rows = args.m / s.team.size;
  s.pattern = detail::resolve_pattern(args.pattern, rows);
  s.gemm = s.pattern == ReduceScatterPattern::kBulkSynchronous
               ? detail::make_gemm(DType::kBF16, DType::kBF16)
               : detail::make_tile_store_gemm_bf16();
  auto& grid = s.grid;
  grid.rows = rows;
  grid.n = args.n;
  grid.slot = std::int64_t{rows} * args.n;
  const auto count = detail::TileCount::of(rows, args.n, s.gemm->tile_m(), s.gemm->tile_n());
  grid.tile_m = count.tile_m;
  grid.tile_n = count.tile_n;
  grid.tiles_n = count.tiles_n;
  grid.tiles = count.tiles;
  grid.c = static_cast<detail::RsElement*>(args.c);

  // Symmetric allocations are collective: every member makes the same ones in the same order.
  const std::size_t partial_count = std::size_t(args.m) * args.n;
  if (!s.partials || s.partials.size() != partial_count) {
    s.partials = {};
    s.partials = ctx.zeros<detail::RsElement>(partial_count);
  }
  detail::ensure_flags(ctx, s.flags, std::size_t(s.team.size + 1) * grid.tiles + s.team.size + 1);
  grid.slots = s.partials.data();

  const GemmArguments g = detail::partial_gemm(args, s.partials.data());
  if (s.pattern == ReduceScatterPattern::kBulkSynchronous) {
    const bool same_team = s.comm && s.comm_team.start == s.team.start &&
                           s.comm_team.size == s.team.size && s.comm_team.stride == s.team.stride;
    if (!same_team) {
      s.comm = {};  // collective, like the construction
      s.comm = std::make_unique<iris::ccl::Communicator>(ctx, s.team);
      s.comm_team = s.team;
    }
    s.gemm->initialize(g, nullptr, workspace, stream);
    return;
  }
  detail::TileStore tiles{};
  tiles.ctx = ctx.device();
  tiles.receivers = s.team;
  tiles.flags = s.arrivals();
  tiles.flag_offset = std::int64_t{s.me} * grid.tiles;
  tiles.first_receiver = s.me;
  tiles.trace = s.trace;
  tiles.owner_rows = rows;
  tiles.slot_offset = std::int64_t{s.me} * grid.slot;
  s.gemm->initialize(g, &tiles, workspace, stream);
  // The reducers spin on the members' GEMMs: with ranks sharing a GPU, all of them together
  // must leave SMs free for those GEMMs (a GEMM CTA needs a whole SM).
  const int sharing = detail::ranks_per_gpu(ctx);
  const int blocks = sharing > 1 ? std::max(1, 16 / sharing) : 2 * detail::device_sms();
  s.reduce_blocks = std::min(grid.tiles, args.reduce_blocks ? args.reduce_blocks : blocks);
}

void GemmReduceScatter::run(cudaStream_t stream) {
  auto& s = *state_;
  if (!s.gemm)
    throw Error(Errc::kInvalidArgument, "iris::ops::GemmReduceScatter::run before initialize");
  const auto& a = s.args;
  if (s.pattern == ReduceScatterPattern::kBulkSynchronous) {
    s.gemm->run(stream);
    s.comm->reduce_scatter(static_cast<detail::RsElement*>(a.c), s.partials.data(),
                           static_cast<std::size_t>(s.grid.slot), iris::ccl::ReduceOp::kSum,
                           stream);
    return;
  }
  const iris::device::Context dctx = s.ctx->device();
  detail::wait_for_slots<<<1, 32, 0, stream>>>(dctx, s.team.size, s.freed(), s.runs());
  IRIS_CUDA_CHECK(cudaGetLastError());
  s.gemm->run(stream);
  detail::reduce_tiles<<<s.reduce_blocks, detail::kReduceThreads, 0, stream>>>(
      dctx, s.team.size, s.grid, s.arrivals(), s.done());
  IRIS_CUDA_CHECK(cudaGetLastError());
  detail::free_slots<<<1, 32, 0, stream>>>(dctx, s.team, s.me, s.freed());
  IRIS_CUDA_CHECK(cudaGetLastError());
}

ReduceScatterPattern GemmReduceScatter::pattern() const {
  return state_->pattern;
}
const std::uint64_t* GemmReduceScatter::tile_flags() const {
  return state_->arrivals();
}
int GemmReduceScatter::tiles_per_block() const {
  return state_->grid.tiles;
}
int GemmReduceScatter::tiles_n() const {
  return state_->grid.tiles_n;
}
int GemmReduceScatter::tile_m() const {
  return state_->grid.tile_m;
}
int GemmReduceScatter::tile_n() const {
  return state_->grid.tile_n;
}

}  // namespace iris::ops
