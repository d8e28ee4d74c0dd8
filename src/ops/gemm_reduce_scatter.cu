// iris::ops::GemmReduceScatter: the host op. The fused pattern is the tile-store GEMM on its
// reduce-scatter route into the owners' per-source slots, then the slot reduction of
// detail/slot_reduce.cuh over this rank's row block; producer-consumer is the tile-store GEMM
// into this rank's own partials beside the pulling reducer of detail/pull_reduce.cuh over this
// rank's rows, and workgroup-specialized the same GEMM and reducer in one launch;
// bulk-synchronous is the GEMM, then an iris::ccl reduce_scatter.
#include "iris/ops/gemm_reduce_scatter.hpp"

#include <cuda_bf16.h>

#include <algorithm>
#include <string>

#include "iris/ccl/communicator.hpp"
#include "iris/host/error.hpp"
#include "iris/ops/detail/comm_op.hpp"
#include "iris/ops/detail/gemm_runner.hpp"
#include "iris/ops/detail/pull_reduce.cuh"
#include "iris/ops/detail/slot_reduce.cuh"
#include "iris/ops/detail/tuning.hpp"

namespace iris::ops {

std::string_view to_string(ReduceScatterPattern pattern) noexcept {
  switch (pattern) {
    case ReduceScatterPattern::kAuto:
      return "auto";
    case ReduceScatterPattern::kBulkSynchronous:
      return "bulk_synchronous";
    case ReduceScatterPattern::kFusedSequential:
      return "fused_sequential";
    case ReduceScatterPattern::kProducerConsumer:
      return "producer_consumer";
    case ReduceScatterPattern::kWorkgroupSpecialized:
      return "workgroup_specialized";
  }
  return "?";
}

namespace detail {

using RsElement = __nv_bfloat16;

struct ReduceScatterState {
  Context* ctx = nullptr;
  GemmReduceScatterArguments args{};
  iris::team team{};
  int me = 0;
  ReduceScatterPattern pattern = ReduceScatterPattern::kAuto;
  std::unique_ptr<GemmRunner> gemm;               // bulk-synchronous and fused
  std::unique_ptr<iris::ccl::Communicator> comm;  // bulk-synchronous only
  // This rank's rows of C (rows = M / team.size) and the partials of them that every member
  // sent: member q's at slot q.
  SlotGrid<RsElement> grid{};
  // M x N: the slots (fused) or this rank's partial product (the other patterns).
  Buffer<RsElement> partials;
  // Fused: SlotFlags over team.size sources and this block's tiles; producer-consumer and
  // workgroup-specialized: PullFlags over the tiles of the whole partial product.
  Buffer<std::uint64_t> flags;
  int reduce_blocks = 0;
  TraceBuffer trace{};
  // Producer-consumer and workgroup-specialized: this rank's GEMM and the reducer of its rows
  // of the partials' sum.
  PullReduction<RsElement> pull;

  SlotFlags slot_flags() const { return {flags.data(), team.size, grid.tiles}; }
};

namespace {
/// Whether `pattern` can run with row blocks of `rows_per_member` rows: the fused epilogue sends
/// whole tiles to one owner, so it needs row blocks of whole tiles; the others take any.
bool runs(ReduceScatterPattern pattern, int rows_per_member) {
  return pattern != ReduceScatterPattern::kFusedSequential || rows_per_member % store_tile_m() == 0;
}

/// kAuto: the measured table (IRIS_OPS_TUNING; none compiled in) for (W, M, N, K of all ranks
/// together, as the benchmark reports it), else the rule: fused sequential when the row blocks
/// are whole tiles, else bulk-synchronous.
ReduceScatterPattern resolve_pattern(const GemmReduceScatterArguments& args, int members) {
  if (args.pattern != ReduceScatterPattern::kAuto) return args.pattern;
  const int rows = args.m / members;
  const auto rule = runs(ReduceScatterPattern::kFusedSequential, rows)
                        ? ReduceScatterPattern::kFusedSequential
                        : ReduceScatterPattern::kBulkSynchronous;
  return OpsTuning::current()
      .choose(members, args.m, args.n, static_cast<int>(std::int64_t{args.k} * members), rule,
              [&](ReduceScatterPattern p) { return runs(p, rows); })
      .pattern;
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
  // Producer-consumer and workgroup-specialized take any such M: their reducer sums only this
  // rank's rows of a tile that also holds another member's, so, as bulk-synchronous, they need
  // no whole tiles per block. kAuto never resolves to a pattern that cannot run the problem.
  const int rows = args.m / team.size;
  if (!detail::runs(args.pattern, rows))
    return Status::failure(
        "the fused pattern sends whole tiles to the owner of their rows: M / team.size = " +
        std::to_string(rows) + " must be a multiple of " + std::to_string(detail::store_tile_m()) +
        " (the GEMM's tile rows); use the bulk-synchronous pattern");
  if (auto status = detail::check_symmetric_c<detail::RsElement>(
          ctx, args.c, "M / team.size x N", rows, args.n, args.m > 0 && args.n > 0);
      !status)
    return status;
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
  s.pattern = detail::resolve_pattern(args, s.team.size);
  auto* c = static_cast<detail::RsElement*>(args.c);

  // Symmetric allocations are collective: every member makes the same ones in the same order.
  detail::ensure_zeros(ctx, s.partials, std::size_t(args.m) * args.n);
  const GemmArguments g = detail::partial_gemm(args, s.partials.data());
  s.gemm = {};
  if (detail::pulls(s.pattern)) {
    // Every member's partial tile t raises ready[t] on that member only; this rank's reducer
    // pulls the tiles that hold its rows from every member.
    s.pull.initialize(ctx, s.team, detail::pull_launch(s.pattern), g, s.flags, c, s.me * rows,
                      (s.me + 1) * rows, args.reduce_blocks, s.trace, workspace, stream);
    s.grid = detail::slot_grid<detail::RsElement>(
        s.partials.data(), c, rows, args.n,
        detail::TileCount::of(rows, args.n, s.pull.grid.tile_m, s.pull.grid.tile_n));
    return;
  }
  s.gemm = s.pattern == ReduceScatterPattern::kBulkSynchronous
               ? detail::make_gemm(DType::kBF16, DType::kBF16)
               : detail::make_tile_store_gemm_bf16();
  const auto count = detail::TileCount::of(rows, args.n, s.gemm->tile_m(), s.gemm->tile_n());
  s.grid = detail::slot_grid<detail::RsElement>(s.partials.data(), c, rows, args.n, count);
  detail::ensure_zeros(ctx, s.flags, detail::SlotFlags::count(s.team.size, count.tiles));
  if (s.pattern == ReduceScatterPattern::kBulkSynchronous) {
    detail::ensure_communicator(ctx, s.comm, s.team, iris::ccl::CommunicatorOptions{});
    // nullptr: the plain GEMM owns the workspace its configuration needs (the op's is 0 bytes).
    s.gemm->initialize(g, nullptr, nullptr, stream);
    return;
  }
  // Member q's tile t raises arrivals[q * tiles + t] on the owner of its rows, into slot q there.
  detail::TileStore tiles = detail::slot_store(ctx.device(), s.team, s.me, s.slot_flags(), s.trace);
  tiles.owner_rows = rows;
  tiles.slot_offset = std::int64_t{s.me} * s.grid.slot;
  s.gemm->initialize(g, &tiles, workspace, stream);
  s.reduce_blocks = detail::spinner_blocks(ctx, s.grid.tiles, args.reduce_blocks);
}

void GemmReduceScatter::run(cudaStream_t stream) {
  auto& s = *state_;
  if (!s.gemm && !s.pull.bound())
    throw Error(Errc::kInvalidArgument, "iris::ops::GemmReduceScatter::run before initialize");
  const auto& a = s.args;
  if (s.pattern == ReduceScatterPattern::kBulkSynchronous) {
    s.gemm->run(stream);
    s.comm->reduce_scatter(static_cast<detail::RsElement*>(a.c), s.partials.data(),
                           static_cast<std::size_t>(s.grid.slot), iris::ccl::ReduceOp::kSum,
                           stream);
    return;
  }
  if (detail::pulls(s.pattern)) {
    s.pull.run(s.ctx->device(), s.team, s.me, stream);
    return;
  }
  detail::run_slot_reduction(s.ctx->device(), s.team, s.me, s.grid, s.slot_flags(), s.reduce_blocks,
                             *s.gemm, stream);
}

ReduceScatterPattern GemmReduceScatter::pattern() const {
  return state_->pattern;
}
const std::uint64_t* GemmReduceScatter::tile_flags() const {
  const auto& s = *state_;
  return detail::pulls(s.pattern) ? s.pull.flags.ready() : s.slot_flags().arrivals();
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
