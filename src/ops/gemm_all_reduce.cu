// iris::ops::GemmAllReduce: the host op. One-shot is the tile-store GEMM on its all-scatter route
// into per-source slots, then the slot reduction of detail/slot_reduce.cuh; two-shot is
// GemmReduceScatter (its fused route) followed by an iris::ccl all_gather; producer-consumer is
// the tile-store GEMM into this rank's own partials beside the pulling reducer of
// detail/pull_reduce.cuh over all of C, and workgroup-specialized the same GEMM and reducer in
// one launch.
#include "iris/ops/gemm_all_reduce.hpp"

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
    case AllReducePattern::kProducerConsumer:
      return "producer_consumer";
    case AllReducePattern::kWorkgroupSpecialized:
      return "workgroup_specialized";
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
  SlotGrid<ArElement> grid{};                      // all of C
  // Bulk-synchronous, producer-consumer and workgroup-specialized: this rank's M x N partial
  // product; one-shot: the [W][M x N] slots.
  Buffer<ArElement> partials;
  // One-shot: SlotFlags over team.size sources and C's tiles; producer-consumer and
  // workgroup-specialized: PullFlags over C's tiles.
  Buffer<std::uint64_t> flags;
  int reduce_blocks = 0;
  TraceBuffer trace{};
  // Producer-consumer and workgroup-specialized: this rank's GEMM and the reducer of all of C
  // from every member's partials.
  PullReduction<ArElement> pull;

  SlotFlags slot_flags() const { return {flags.data(), team.size, grid.tiles}; }
};

namespace {
bool rows_are_whole_tiles(int m, int members) {
  return m % members == 0 && (m / members) % store_tile_m() == 0;
}

/// Whether `pattern` can run an M-row C on `members` ranks: two-shot reduces whole tiles on the
/// owner of their rows; the others take any M.
bool runs(AllReducePattern pattern, int m, int members) {
  return pattern != AllReducePattern::kTwoShot || rows_are_whole_tiles(m, members);
}

/// kAuto's rule where no table answers (never a pattern that cannot run the problem).
AllReducePattern rule(int m, int n, int members, int sharing) {
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
  copy_operands(a, r);
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
  if (args.pattern != AllReducePattern::kAuto) return args.pattern;
  const int members = std::max(1, detail::resolve_team(ctx, args.team).size);
  // The measured table (IRIS_OPS_TUNING; none compiled in) for (W, M, N, K of all ranks
  // together, as the benchmark reports it), else the rule.
  return detail::OpsTuning::current()
      .choose(members, args.m, args.n, static_cast<int>(std::int64_t{args.k} * members),
              detail::rule(args.m, args.n, members, detail::ranks_per_gpu(ctx)),
              [&](AllReducePattern p) { return detail::runs(p, args.m, members); })
      .pattern;
}

Status GemmAllReduce::can_implement(const Context& ctx, const GemmAllReduceArguments& args) {
  const iris::team team = detail::resolve_team(ctx, args.team);
  int me = -1;
  if (auto status = detail::check_membership(ctx, team, me); !status) return status;
  if (args.reduce_blocks < 0)
    return Status::failure("reduce_blocks must be 0 (choose) or positive");
  // kAuto never resolves to a pattern that cannot run the problem.
  if (args.m > 0 && !detail::runs(args.pattern, args.m, team.size))
    return Status::failure(
        "the two-shot pattern reduces whole tiles on the owner of their rows: "
        "M = " +
        std::to_string(args.m) + " must split into " + std::to_string(team.size) +
        " row blocks of a multiple of " + std::to_string(detail::store_tile_m()) +
        " rows (the GEMM's tile rows); use one-shot or bulk-synchronous");
  if (auto status = detail::check_symmetric_c<detail::ArElement>(ctx, args.c, "M x N", args.m,
                                                                 args.n, args.m > 0 && args.n > 0);
      !status)
    return status;
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
  const std::size_t product = std::size_t(args.m) * args.n;

  if (s.pattern == AllReducePattern::kTwoShot) {
    detail::ensure_communicator(ctx, s.comm, s.team);
    s.reduce_rows = std::make_unique<GemmReduceScatter>(ctx);
    s.reduce_rows->initialize(detail::row_blocks(args, s.team, s.me), workspace, stream);
    return;
  }
  if (s.pattern == AllReducePattern::kBulkSynchronous) {
    detail::ensure_communicator(ctx, s.comm, s.team);
    detail::ensure_zeros(ctx, s.partials, product);
    s.gemm = detail::make_gemm(DType::kBF16, DType::kBF16);
    // nullptr: the plain GEMM owns the workspace its configuration needs (the op's is 0 bytes).
    s.gemm->initialize(detail::partial_gemm(args, s.partials.data()), nullptr, nullptr, stream);
    return;
  }

  if (detail::pulls(s.pattern)) {
    // Every member's partial tile t raises ready[t] on that member only; this rank's reducer
    // pulls every tile of C from every member.
    detail::ensure_zeros(ctx, s.partials, product);
    auto* c = static_cast<detail::ArElement*>(args.c);
    s.pull.initialize(ctx, s.team, detail::pull_launch(s.pattern),
                      detail::partial_gemm(args, s.partials.data()), s.flags, c, 0, args.m,
                      args.reduce_blocks, s.trace, workspace, stream);
    // tiles(), tiles_n(), tile_m(), tile_n(): C's grid, as one-shot's.
    s.grid = detail::slot_grid<detail::ArElement>(
        s.partials.data(), c, args.m, args.n,
        detail::TileCount::of(args.m, args.n, s.pull.grid.tile_m, s.pull.grid.tile_n));
    return;
  }

  // One-shot: the tile-store kernel (the all-scatter route) into this rank's slot everywhere.
  s.gemm = detail::make_tile_store_gemm_bf16();
  detail::ensure_zeros(ctx, s.partials, product * s.team.size);
  const auto count = detail::TileCount::of(args.m, args.n, s.gemm->tile_m(), s.gemm->tile_n());
  s.grid = detail::slot_grid<detail::ArElement>(
      s.partials.data(), static_cast<detail::ArElement*>(args.c), args.m, args.n, count);
  detail::ensure_zeros(ctx, s.flags, detail::SlotFlags::count(s.team.size, count.tiles));
  // Member q's tile t raises arrivals[q * tiles + t] on every member, into slot q there.
  const detail::TileStore tiles =
      detail::slot_store(ctx.device(), s.team, s.me, s.slot_flags(), s.trace);
  // owner_rows = 0: every tile to every member, at its own place in D = this rank's slot.
  s.gemm->initialize(detail::partial_gemm(args, s.partials.data() + s.me * s.grid.slot), &tiles,
                     workspace, stream);
  s.reduce_blocks = detail::spinner_blocks(ctx, s.grid.tiles, args.reduce_blocks);
}

void GemmAllReduce::run(cudaStream_t stream) {
  auto& s = *state_;
  if (!s.gemm && !s.reduce_rows && !s.pull.bound())
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
    case AllReducePattern::kProducerConsumer:
    case AllReducePattern::kWorkgroupSpecialized:
      s.pull.run(s.ctx->device(), s.team, s.me, stream);
      return;
    default:
      break;
  }
  detail::run_slot_reduction(s.ctx->device(), s.team, s.me, s.grid, s.slot_flags(), s.reduce_blocks,
                             *s.gemm, stream);
}

AllReducePattern GemmAllReduce::pattern() const {
  return state_->pattern;
}
const std::uint64_t* GemmAllReduce::tile_flags() const {
  const auto& s = *state_;
  if (s.reduce_rows) return s.reduce_rows->tile_flags();
  if (detail::pulls(s.pattern)) return s.pull.flags.ready();
  return s.pattern == AllReducePattern::kOneShot ? s.slot_flags().arrivals() : nullptr;
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
