// iris::ops::GemmAllScatter: the host op, the tile-pushing kernel of the producer-consumer
// communication kernel, the completion wait, and the bulk-synchronous all-gather (iris::ccl's).
#include "iris/ops/gemm_all_scatter.hpp"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "iris/ccl.hpp"
#include "iris/device/rma.hpp"
#include "iris/device/signal.hpp"
#include "iris/host/error.hpp"
#include "iris/ops/detail/comm_op.hpp"
#include "iris/ops/detail/gemm_runner.hpp"
#include "iris/ops/detail/send_tiles.hpp"
#include "iris/ops/detail/trace_record.hpp"
#include "iris/ops/detail/tuning.hpp"
#include "iris/ops/detail/workgroup_specialized.hpp"

namespace iris::ops {

std::string_view to_string(AllScatterPattern pattern) noexcept {
  switch (pattern) {
    case AllScatterPattern::kAuto:
      return "auto";
    case AllScatterPattern::kBulkSynchronous:
      return "bulk_synchronous";
    case AllScatterPattern::kFusedSequential:
      return "fused_sequential";
    case AllScatterPattern::kProducerConsumer:
      return "producer_consumer";
    case AllScatterPattern::kWorkgroupSpecialized:
      return "workgroup_specialized";
  }
  return "?";
}

namespace detail {

/// C's elements as the tile grid and the send loop see them: 2-byte words, copied as they are
/// (bf16 or fp16 alike; only the GEMM kernels convert, each compiled for one type).
using Element = __nv_bfloat16;
constexpr unsigned kPushThreads = 256;

/// The producer-consumer pattern's communication kernel: one block per tile (grid-stride).
__global__ void __launch_bounds__(kPushThreads)
    push_tiles(const __grid_constant__ SendTiles sends) {
  sends(static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x));
}

/// Completion: waits (bounded) until every arrival flag reaches this run's number, kept in
/// `runs` (this rank's own counter, so graph replays count correctly).
__global__ void wait_for_tiles(const __grid_constant__ iris::device::Context ctx,
                               const std::uint64_t* arrivals, int count, std::uint64_t* runs) {
  __shared__ std::uint64_t target;
  if (threadIdx.x == 0) target = *runs + 1;
  __syncthreads();
  for (int i = threadIdx.x; i < count; i += blockDim.x)
    iris::device::wait_until(ctx, arrivals + i, iris::cmp::ge, target);
  __syncthreads();
  if (threadIdx.x == 0) *runs = target;
}

/// The all-gather step of the bulk-synchronous pattern: iris::ccl's 2-D all_gather of the
/// members' column blocks of C, in place (each member's GEMM wrote its own block).
void all_gather_blocks(iris::ccl::Communicator& comm, int me, const TileGrid& grid,
                       cudaStream_t stream) {
  const auto ldc = static_cast<std::size_t>(grid.ldc);
  comm.all_gather_2d(grid.c, ldc, grid.c + static_cast<std::int64_t>(me) * grid.n, ldc,
                     static_cast<std::size_t>(grid.m), static_cast<std::size_t>(grid.n), stream);
}

/// Bulk-synchronous completion: the all-gather ended before this kernel (stream order), so all
/// of C is here. Raises every arrival flag to this run's number, kept in `runs` (this rank's own
/// counter), as the per-tile patterns' pushes do.
__global__ void mark_arrived(const __grid_constant__ iris::device::Context ctx,
                             std::uint64_t* arrivals, int count, std::uint64_t* runs) {
  __shared__ std::uint64_t target;
  if (threadIdx.x == 0) target = *runs + 1;
  __syncthreads();
  for (int i = threadIdx.x; i < count; i += blockDim.x)
    iris::device::signal_set(ctx, arrivals + i, target, ctx.rank());
  __syncthreads();
  if (threadIdx.x == 0) *runs = target;
}

struct AllScatterState {
  Context* ctx = nullptr;
  GemmAllScatterArguments args{};
  iris::team team{};
  int me = 0;
  AllScatterPattern pattern = AllScatterPattern::kAuto;
  std::unique_ptr<GemmRunner> gemm;  // every pattern but workgroup-specialized
  std::unique_ptr<WorkgroupSpecializedGemm<SendTiles>> ws;  // workgroup-specialized: GEMM + senders
  std::unique_ptr<iris::ccl::Communicator> comm;  // bulk-synchronous: the team's all-gather
  TileGrid grid{};
  // [arrivals: team.size * tiles][ready: tiles][runs: 1]
  Buffer<std::uint64_t> flags;
  int sms = 0, gemm_sms = 0, comm_blocks = 0;  // producer-consumer, workgroup-specialized
  SideStream side;                             // producer-consumer: the senders' stream
  TraceBuffer trace{};

  std::uint64_t* arrivals() const { return flags.data(); }
  std::uint64_t* ready() const { return flags.data() + std::int64_t{team.size} * grid.tiles; }
  std::uint64_t* runs() const { return ready() + grid.tiles; }
  SendTiles sends(const iris::device::Context& dctx) const {
    return SendTiles{dctx, team, me, grid, arrivals(), ready(), trace};
  }
};

namespace {
GemmArguments block_gemm(const GemmAllScatterArguments& a, const iris::team& team, int me) {
  void* d = a.c == nullptr
                ? nullptr
                : static_cast<void*>(static_cast<Element*>(a.c) + std::int64_t{me} * a.n);
  GemmArguments g = gemm_of(a, a.n, d, std::int64_t{a.n} * team.size);
  g.a_type = g.b_type = g.d_type = a.type;
  return g;
}

/// The tile-store GEMM (fused-sequential, producer-consumer) of `type`: bf16 or fp16.
std::unique_ptr<GemmRunner> make_tile_store_gemm(DType type) {
  return type == DType::kF16 ? make_tile_store_gemm_f16() : make_tile_store_gemm_bf16();
}

/// The workgroup-specialized kernel of `type`: bf16 or fp16.
std::unique_ptr<WorkgroupSpecializedGemm<SendTiles>> make_workgroup_specialized_gemm(DType type) {
  return type == DType::kF16 ? make_gemm_and_send_f16() : make_gemm_and_send_bf16();
}
}  // namespace

}  // namespace detail

GemmAllScatter::GemmAllScatter(Context& ctx) : state_(std::make_unique<detail::AllScatterState>()) {
  state_->ctx = &ctx;
}
GemmAllScatter::~GemmAllScatter() = default;
GemmAllScatter::GemmAllScatter(GemmAllScatter&&) noexcept = default;
GemmAllScatter& GemmAllScatter::operator=(GemmAllScatter&&) noexcept = default;

Status GemmAllScatter::can_implement(const Context& ctx, const GemmAllScatterArguments& args) {
  if (args.type != DType::kBF16 && args.type != DType::kF16)
    return Status::failure("the element type is " + std::string(to_string(args.type)) +
                           "; GemmAllScatter takes bf16 or fp16 (A, B and C of one type)");
  const iris::team team = detail::resolve_team(ctx, args.team);
  int me = -1;
  if (auto status = detail::check_membership(ctx, team, me); !status) return status;
  if (auto status = detail::check_symmetric_c<detail::Element>(
          ctx, args.c, "M x N * team.size", args.m, std::int64_t{args.n} * team.size,
          args.m > 0 && args.n > 0, args.type);
      !status)
    return status;
  if (args.gemm_sms < 0 || args.comm_blocks < 0)
    return Status::failure("gemm_sms and comm_blocks must be 0 (choose) or positive");
  if ((args.pattern == AllScatterPattern::kProducerConsumer ||
       args.pattern == AllScatterPattern::kWorkgroupSpecialized) &&
      args.gemm_sms == 1)
    return Status::failure("gemm_sms = 1 cannot hold the GEMM's 2-CTA clusters; use 2 or more");
  return Gemm::can_implement(detail::block_gemm(args, team, me));
}

std::size_t GemmAllScatter::workspace_size(const GemmAllScatterArguments&) {
  return 0;
}

void GemmAllScatter::initialize(const GemmAllScatterArguments& args, void* workspace,
                                cudaStream_t stream) {
  auto& s = *state_;
  Context& ctx = *s.ctx;
  if (auto status = can_implement(ctx, args); !status)
    throw Error(Errc::kInvalidArgument, "iris::ops::GemmAllScatter: " + status.message);
  s.args = args;
  s.team = detail::resolve_team(ctx, args.team);
  s.me = s.team.index_of(ctx.rank());
  s.trace = args.trace != nullptr ? args.trace->device() : detail::TraceBuffer{};
  // kAuto: the measured table (IRIS_OPS_TUNING, then the compiled-in one) picks the pattern
  // and, where the caller left them at 0, the SM split; the rule where neither answers is fused
  // sequential (no SM split, no second stream; docs/ops.md). Every pattern runs every problem.
  s.pattern = args.pattern;
  int gemm_sms = args.gemm_sms, comm_blocks = args.comm_blocks;
  if (s.pattern == AllScatterPattern::kAuto) {
    const auto choice = detail::OpsTuning::current().choose(
        s.team.size, args.m, static_cast<int>(std::int64_t{args.n} * s.team.size), args.k,
        AllScatterPattern::kFusedSequential, [](AllScatterPattern) { return true; });
    s.pattern = choice.pattern;
    if (gemm_sms == 0) gemm_sms = choice.gemm_sms;
    if (comm_blocks == 0) comm_blocks = choice.comm_blocks;
  }
  const GemmArguments g = detail::block_gemm(args, s.team, s.me);
  s.gemm = {};
  s.ws = {};
  if (s.pattern == AllScatterPattern::kWorkgroupSpecialized)
    s.ws = detail::make_workgroup_specialized_gemm(args.type);
  else
    s.gemm = s.pattern == AllScatterPattern::kBulkSynchronous
                 ? detail::make_gemm(args.type, args.type)
                 : detail::make_tile_store_gemm(args.type);
  auto& grid = s.grid;
  grid.c = static_cast<detail::Element*>(args.c);
  grid.m = args.m;
  grid.n = args.n;
  grid.ldc = g.ldd;
  const auto count = detail::TileCount::of(args.m, args.n, s.ws ? s.ws->tile_m() : s.gemm->tile_m(),
                                           s.ws ? s.ws->tile_n() : s.gemm->tile_n());
  grid.tile_m = count.tile_m;
  grid.tile_n = count.tile_n;
  grid.tiles_n = count.tiles_n;
  grid.tiles = count.tiles;

  detail::ensure_zeros(ctx, s.flags, std::size_t(s.team.size + 1) * grid.tiles + 1);
  s.sms = detail::device_sms();

  GemmArguments gemm_args = g;
  if (s.pattern == AllScatterPattern::kBulkSynchronous) {
    // Collective over the world, like the flags above; the smallest packet slots (the 2-D
    // all_gather uses none).
    const std::size_t packets = 2 * std::size_t(s.team.size) * 16;
    detail::ensure_communicator(
        ctx, s.comm, s.team,
        iris::ccl::CommunicatorOptions{.packet_bytes = (packets + 255) / 256 * 256,
                                       .staging_bytes = 0});
    // nullptr: the plain GEMM owns the workspace its configuration needs (the op's is 0 bytes).
    s.gemm->initialize(gemm_args, nullptr, nullptr, stream);
  } else if (s.pattern == AllScatterPattern::kFusedSequential) {
    detail::TileStore tiles{ctx.device(), s.team, s.arrivals(), std::int64_t{s.me} * grid.tiles,
                            s.me,         s.trace};
    s.gemm->initialize(gemm_args, &tiles, workspace, stream);
  } else if (s.pattern == AllScatterPattern::kProducerConsumer) {
    // Ranks sharing this GPU each keep comm_blocks spinning blocks resident: together they must
    // leave SMs for the GEMMs, or a GEMM CTA could wait forever for a whole free SM.
    const int sharing = detail::ranks_per_gpu(ctx);
    s.gemm_sms = gemm_sms ? std::min(gemm_sms, s.sms) : s.sms - 16;
    const int left = std::max(2, s.sms - s.gemm_sms);
    s.comm_blocks = comm_blocks ? comm_blocks : std::max(1, left / sharing);
    gemm_args.sm_count = s.gemm_sms;
    detail::TileStore tiles{ctx.device(), iris::team{ctx.rank(), 1, 1}, s.ready(), 0, 0, s.trace};
    s.gemm->initialize(gemm_args, &tiles, workspace, stream);
    s.side.create();
  } else {
    // One launch: GEMM blocks and senders. The whole grid is sized to be resident at once with
    // the other ranks sharing this GPU (resident clusters / sharing ranks). The senders wait
    // only for this rank's own GEMM blocks, which have lower block indices and so are dispatched
    // first; a sender never waits on a peer.
    if (auto status = s.ws->can_implement(g); !status)
      throw Error(Errc::kInvalidArgument, "iris::ops::GemmAllScatter: " + status.message);
    const int cluster = s.ws->cluster_size();
    const auto split =
        detail::workgroup_split(detail::workgroup_budget(ctx, s.ws->max_resident_blocks(), cluster),
                                cluster, s.sms, gemm_sms, comm_blocks);
    s.comm_blocks = split.side_blocks;
    s.gemm_sms = split.gemm_blocks;
    detail::TileStore tiles{ctx.device(), iris::team{ctx.rank(), 1, 1}, s.ready(), 0, 0, s.trace};
    s.ws->initialize(g, tiles, s.sends(ctx.device()), s.gemm_sms, s.comm_blocks);
    s.gemm_sms = s.ws->gemm_blocks();
  }
}

void GemmAllScatter::run(cudaStream_t stream) {
  auto& s = *state_;
  if (!s.gemm && !s.ws)
    throw Error(Errc::kInvalidArgument, "iris::ops::GemmAllScatter::run before initialize");
  const iris::device::Context dctx = s.ctx->device();
  switch (s.pattern) {
    case AllScatterPattern::kBulkSynchronous:
      s.gemm->run(stream);
      detail::all_gather_blocks(*s.comm, s.me, s.grid, stream);
      detail::mark_arrived<<<1, 256, 0, stream>>>(dctx, s.arrivals(), s.team.size * s.grid.tiles,
                                                  s.runs());
      IRIS_CUDA_CHECK(cudaGetLastError());
      return;
    case AllScatterPattern::kFusedSequential:
      s.gemm->run(stream);
      break;
    case AllScatterPattern::kProducerConsumer: {
      const cudaStream_t senders = s.side.fork(stream);
      s.gemm->run(stream);
      detail::push_tiles<<<s.comm_blocks, detail::kPushThreads, 0, senders>>>(s.sends(dctx));
      IRIS_CUDA_CHECK(cudaGetLastError());
      s.side.join(stream);
      break;
    }
    case AllScatterPattern::kWorkgroupSpecialized:
      s.ws->run(stream);
      break;
    case AllScatterPattern::kAuto:
      throw Error(Errc::kInternal, "GemmAllScatter: unresolved pattern");
  }
  detail::wait_for_tiles<<<1, 256, 0, stream>>>(dctx, s.arrivals(), s.team.size * s.grid.tiles,
                                                s.runs());
  IRIS_CUDA_CHECK(cudaGetLastError());
}

AllScatterPattern GemmAllScatter::pattern() const {
  return state_->pattern;
}
const std::uint64_t* GemmAllScatter::tile_flags() const {
  return state_->arrivals();
}
int GemmAllScatter::tiles_per_block() const {
  return state_->grid.tiles;
}
int GemmAllScatter::tiles_n() const {
  return state_->grid.tiles_n;
}
int GemmAllScatter::tile_m() const {
  return state_->grid.tile_m;
}
int GemmAllScatter::tile_n() const {
  return state_->grid.tile_n;
}

}  // namespace iris::ops
