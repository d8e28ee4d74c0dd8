// iris::ops::GemmAllReduce: the host op. One-shot is the tile-store GEMM on its all-scatter route
// into per-source slots, then the slot reduction of detail/slot_reduce.cuh; two-shot is
// GemmReduceScatter (its fused route) followed by an iris::ccl all_gather.
#include "iris/ops/gemm_all_reduce.hpp"

#include <cuda_bf16.h>

#include <algorithm>
#include <string>

#include "iris/ccl/communicator.hpp"
#include "iris/host/error.hpp"
#include "iris/ops/detail/comm_op.hpp"
#include "iris/ops/detail/gemm_runner.hpp"
#include "iris/ops/detail/slot_reduce.cuh"
#include "iris/ops/gemm_reduce_scatter.hpp"

namespace iris::ops {

std::string_view to_string(AllReducePattern pattern) noexcept {
  switch (pattern) {
    case AllReducePattern::kAuto:
      return "auto";
    case AllReducePattern::kBulkSynchronous:
      return "bulk_synchronous";
    case AllReducePattern::kOneShot:
      return "one_shot";
    case AllReducePattern::kTwoShot:
      return "two_shot";
  }
  return "?";
}

namespace detail {

using ArElement = __nv_bfloat16;
/// kAuto: one-shot while its slots (team.size x M x N bf16) take at most this many bytes.
constexpr std::size_t kOneShotSlotBytes = std::size_t{32} << 20;

struct AllReduceState {
  Context* ctx = nullptr;
  GemmAllReduceArguments args{};
  iris::team team{};
  int me = 0;
  AllReducePattern pattern = AllReducePattern::kAuto;
  std::unique_ptr<GemmRunner> gemm;                // bulk-synchronous and one-shot
  std::unique_ptr<GemmReduceScatter> reduce_rows;  // two-shot
  std::unique_ptr<iris::ccl::Communicator> comm;   // bulk-synchronous and two-shot
  iris::team comm_team{};
  SlotGrid<ArElement> grid{};  // all of C
  // Bulk-synchronous: the M x N partial product; one-shot: the [W][M x N] slots.
  Buffer<ArElement> partials;
  // One-shot: [arrivals: team.size * tiles][done: tiles][freed: team.size][runs: 1]
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
GemmArguments partial_gemm(const GemmAllReduceArguments& a, void* d) {
  GemmArguments g{};
  g.m = a.m;
  g.n = a.n;
  g.k = a.k;
  g.a = a.a;
  g.lda = a.lda;
  g.b = a.b;
  g.ldb = a.ldb;
  g.d = d;
  g.ldd = a.n;
  return g;
}

/// Rows of the tile-store kernel's CTA tile, without a GPU (the runner only names its shape).
int store_tile_m() {
  static const int rows = make_tile_store_gemm_bf16()->tile_m();
  return rows;
}

bool rows_are_whole_tiles(int m, int members) {
  return m % members == 0 && (m / members) % store_tile_m() == 0;
}

AllReducePattern resolve_pattern(AllReducePattern asked, int m, int n, int members, int sharing) {
  if (asked != AllReducePattern::kAuto) return asked;
  // Measured with ranks sharing one GPU: the fused forms' reducers spin on the SMs the members'
  // GEMMs need, and bulk-synchronous wins at every size tried (docs/ops.md has the figures).
  if (sharing > 1) return AllReducePattern::kBulkSynchronous;
  const std::size_t slot_bytes = std::size_t(members) * m * n * sizeof(ArElement);
  if (members <= 2 || slot_bytes <= kOneShotSlotBytes) return AllReducePattern::kOneShot;
  return rows_are_whole_tiles(m, members) ? AllReducePattern::kTwoShot
                                          : AllReducePattern::kBulkSynchronous;
}

GemmReduceScatterArguments row_blocks(const GemmAllReduceArguments& a, const iris::team& team,
                                      int me) {
  GemmReduceScatterArguments r{};
  r.m = a.m;
  r.n = a.n;
  r.k = a.k;
  r.a = a.a;
  r.lda = a.lda;
  r.b = a.b;
  r.ldb = a.ldb;
  // This rank's row block of C: the in-place source of the all_gather that follows.
  r.c = static_cast<ArElement*>(a.c) + std::int64_t{me} * (a.m / team.size) * a.n;
  r.team = team;
  r.pattern = ReduceScatterPattern::kFusedSequential;
  r.reduce_blocks = a.reduce_blocks;
  r.trace = a.trace;
  return r;
}
}  // namespace

}  // namespace detail

GemmAllReduce::GemmAllReduce(Context& ctx) : state_(std::make_unique<detail::AllReduceState>()) {
  state_->ctx = &ctx;
}
GemmAllReduce::~GemmAllReduce() = default;
GemmAllReduce::GemmAllReduce(GemmAllReduce&&) noexcept = default;
GemmAllReduce& GemmAllReduce::operator=(GemmAllReduce&&) noexcept = default;

AllReducePattern GemmAllReduce::choose(const Context& ctx, const GemmAllReduceArguments& args) {
  const iris::team team = detail::resolve_team(ctx, args.team);
  return detail::resolve_pattern(args.pattern, args.m, args.n, std::max(1, team.size),
                                 detail::ranks_per_gpu(ctx));
}

Status GemmAllReduce::can_implement(const Context& ctx, const GemmAllReduceArguments& args) {
  const iris::team team = detail::resolve_team(ctx, args.team);
  if (!team.fits(ctx.world_size()))
    return Status::failure("the team {start " + std::to_string(team.start) + ", size " +
                           std::to_string(team.size) + ", stride " + std::to_string(team.stride) +
                           "} does not fit a world of " + std::to_string(ctx.world_size()) +
                           " ranks");
  const int me = team.index_of(ctx.rank());
  if (me < 0)
    return Status::failure("rank " + std::to_string(ctx.rank()) + " is not a member of the team");
  if (args.reduce_blocks < 0)
    return Status::failure("reduce_blocks must be 0 (choose) or positive");
  const auto pattern = choose(ctx, args);
  if (pattern == AllReducePattern::kTwoShot && args.m > 0 &&
      !detail::rows_are_whole_tiles(args.m, team.size))
    return Status::failure(
        "the two-shot pattern reduces whole tiles on the owner of their rows: "
        "M = " +
        std::to_string(args.m) + " must split into " + std::to_string(team.size) +
        " row blocks of a multiple of " + std::to_string(detail::store_tile_m()) +
        " rows (the GEMM's tile rows); use one-shot or bulk-synchronous");
  if (args.c == nullptr || !ctx.contains(args.c))
    return Status::failure("C must be a symmetric buffer (from the Context's heap) on every rank");
  if (args.m > 0 && args.n > 0) {
    const auto* last =
        static_cast<const detail::ArElement*>(args.c) + std::int64_t{args.m} * args.n - 1;
    if (!ctx.contains(last))
      return Status::failure("C must hold M x N = " + std::to_string(args.m) + " x " +
                             std::to_string(args.n) + " bf16 elements inside the symmetric heap");
  }
  // The GEMM writes packed M x N partials; C (of that shape) stands in for the workspace, which
  // comes from the heap in initialize().
  return Gemm::can_implement(detail::partial_gemm(args, args.c));
}

std::size_t GemmAllReduce::workspace_size(const GemmAllReduceArguments&) {
  return 0;
}

void GemmAllReduce::initialize(const GemmAllReduceArguments& args, void* workspace,
                               cudaStream_t stream) {
  auto& s = *state_;
  Context& ctx = *s.ctx;
  if (auto status = can_implement(ctx, args); !status)
    throw Error(Errc::kInvalidArgument, "iris::ops::GemmAllReduce: " + status.message);
  s.args = args;
  s.team = detail::resolve_team(ctx, args.team);
  s.me = s.team.index_of(ctx.rank());
  s.trace = args.trace != nullptr ? args.trace->device() : detail::TraceBuffer{};
  s.pattern = choose(ctx, args);
  s.gemm = {};
  s.reduce_rows = {};

  // Symmetric allocations are collective: every member makes the same ones in the same order.
  const auto make_comm = [&] {
    const bool same_team = s.comm && s.comm_team.start == s.team.start &&
                           s.comm_team.size == s.team.size && s.comm_team.stride == s.team.stride;
    if (!same_team) {
      s.comm = {};  // collective, like the construction
      s.comm = std::make_unique<iris::ccl::Communicator>(ctx, s.team);
      s.comm_team = s.team;
    }
  };
  const auto make_partials = [&](std::size_t count) {
    if (!s.partials || s.partials.size() != count) {
      s.partials = {};
      s.partials = ctx.zeros<detail::ArElement>(count);
    }
  };
  const std::size_t product = std::size_t(args.m) * args.n;

  if (s.pattern == AllReducePattern::kTwoShot) {
    make_comm();
    s.reduce_rows = std::make_unique<GemmReduceScatter>(ctx);
    s.reduce_rows->initialize(detail::row_blocks(args, s.team, s.me), workspace, stream);
    return;
  }
  if (s.pattern == AllReducePattern::kBulkSynchronous) {
    make_comm();
    make_partials(product);
    s.gemm = detail::make_gemm(DType::kBF16, DType::kBF16);
    s.gemm->initialize(detail::partial_gemm(args, s.partials.data()), nullptr, workspace, stream);
    return;
  }

  // One-shot: the tile-store kernel (the all-scatter route) into this rank's slot everywhere.
  s.gemm = detail::make_tile_store_gemm_bf16();
  make_partials(product * s.team.size);
  auto& grid = s.grid;
  grid.rows = args.m;
  grid.n = args.n;
  grid.slot = static_cast<std::int64_t>(product);
  grid.tile_m = s.gemm->tile_m();
  grid.tile_n = s.gemm->tile_n();
  grid.tiles_n = (args.n + grid.tile_n - 1) / grid.tile_n;
  grid.tiles = grid.tiles_n * ((args.m + grid.tile_m - 1) / grid.tile_m);
  grid.out = static_cast<detail::ArElement*>(args.c);
  grid.slots = s.partials.data();
  const std::size_t flag_count = std::size_t(s.team.size + 1) * grid.tiles + s.team.size + 1;
  if (!s.flags || s.flags.size() != flag_count) {
    s.flags = {};
    s.flags = ctx.zeros<std::uint64_t>(flag_count);
  }
  detail::TileStore tiles{};
  tiles.ctx = ctx.device();
  tiles.receivers = s.team;
  tiles.flags = s.arrivals();
  tiles.flag_offset = std::int64_t{s.me} * grid.tiles;
  tiles.first_receiver = s.me;
  tiles.trace = s.trace;
  // owner_rows = 0: every tile to every member, at its own place in D = this rank's slot.
  s.gemm->initialize(detail::partial_gemm(args, s.partials.data() + s.me * grid.slot), &tiles,
                     workspace, stream);
  // The reducers spin on the members' GEMMs: with ranks sharing a GPU, all of them together
  // must leave SMs free for those GEMMs (a GEMM CTA needs a whole SM).
  const int sharing = detail::ranks_per_gpu(ctx);
  const int blocks = sharing > 1 ? std::max(1, 16 / sharing) : 2 * detail::device_sms();
  s.reduce_blocks = std::min(grid.tiles, args.reduce_blocks ? args.reduce_blocks : blocks);
}

void GemmAllReduce::run(cudaStream_t stream) {
  auto& s = *state_;
  if (!s.gemm && !s.reduce_rows)
    throw Error(Errc::kInvalidArgument, "iris::ops::GemmAllReduce::run before initialize");
  auto* c = static_cast<detail::ArElement*>(s.args.c);
  const std::size_t product = std::size_t(s.args.m) * s.args.n;
  switch (s.pattern) {
    case AllReducePattern::kBulkSynchronous:
      s.gemm->run(stream);
      s.comm->all_reduce(c, s.partials.data(), product, iris::ccl::ReduceOp::kSum, stream);
      return;
    case AllReducePattern::kTwoShot: {
      // Reduce-scatter into this rank's row block of C, then every block to every member, in
      // place (the block is already at its place in C).
      s.reduce_rows->run(stream);
      const std::size_t block = product / s.team.size;
      s.comm->all_gather(c, c + s.me * block, block, stream);
      return;
    }
    default:
      break;
  }
  const iris::device::Context dctx = s.ctx->device();
  detail::wait_until_slots_freed<<<1, 32, 0, stream>>>(dctx, s.team.size, s.freed(), s.runs());
  IRIS_CUDA_CHECK(cudaGetLastError());
  s.gemm->run(stream);
  detail::reduce_slot_tiles<<<s.reduce_blocks, detail::kSlotReduceThreads, 0, stream>>>(
      dctx, s.team.size, s.grid, s.arrivals(), s.done());
  IRIS_CUDA_CHECK(cudaGetLastError());
  detail::announce_slots_freed<<<1, 32, 0, stream>>>(dctx, s.team, s.me, s.freed());
  IRIS_CUDA_CHECK(cudaGetLastError());
}

AllReducePattern GemmAllReduce::pattern() const {
  return state_->pattern;
}
const std::uint64_t* GemmAllReduce::tile_flags() const {
  const auto& s = *state_;
  if (s.reduce_rows) return s.reduce_rows->tile_flags();
  return s.pattern == AllReducePattern::kOneShot ? s.arrivals() : nullptr;
}
int GemmAllReduce::tiles() const {
  const auto& s = *state_;
  return s.reduce_rows ? s.reduce_rows->tiles_per_block() : s.grid.tiles;
}
int GemmAllReduce::tiles_n() const {
  const auto& s = *state_;
  return s.reduce_rows ? s.reduce_rows->tiles_n() : s.grid.tiles_n;
}
int GemmAllReduce::tile_m() const {
  const auto& s = *state_;
  return s.reduce_rows ? s.reduce_rows->tile_m() : s.grid.tile_m;
}
int GemmAllReduce::tile_n() const {
  const auto& s = *state_;
  return s.reduce_rows ? s.reduce_rows->tile_n() : s.grid.tile_n;
}

}  // namespace iris::ops
