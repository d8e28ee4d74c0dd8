// iris::ops::GemmAllScatter: the host op, the tile-pushing kernel of the producer-consumer
// communication kernel, the completion wait, and the bulk-synchronous all-gather (iris::ccl's).
#include "iris/ops/gemm_all_scatter.hpp"

#include <cuda_bf16.h>

#include <algorithm>
#include <string>

#include "iris/ccl.hpp"
#include "iris/device/rma.hpp"
#include "iris/device/signal.hpp"
#include "iris/host/error.hpp"
#include "iris/ops/detail/gemm_runner.hpp"
#include "iris/ops/detail/trace_record.hpp"

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
  }
  return "?";
}

namespace detail {

using Element = __nv_bfloat16;
constexpr unsigned kPushThreads = 256;

/// Where C's tiles are and how they are counted; the same on every member.
struct TileGrid {
  Element* c = nullptr;                                // this rank's copy of the whole C
  int m = 0, n = 0;                                    // rows, columns of one member's block
  std::int64_t ldc = 0;                                // n * team.size
  int tile_m = 0, tile_n = 0, tiles_n = 0, tiles = 0;  // tiles: per block
};

/// One block per tile (grid-stride): this rank's tiles of C go to every other member with
/// put + signal_add on the receiver's arrival flag; its own arrival flag is raised last.
/// With `ready`, each tile is first awaited on its local flag (raised by the GEMM's epilogue),
/// which is then cleared for the next run (this kernel is its only reader, and the next run's
/// GEMM is ordered after it by the op's events).
__global__ void __launch_bounds__(kPushThreads)
    push_tiles(const __grid_constant__ iris::device::Context ctx, iris::team team, int me,
               TileGrid grid, std::uint64_t* arrivals, std::uint64_t* ready, TraceBuffer trace) {
  const iris::block block{};
  const bool tracing = trace.events != nullptr && block.thread_rank() == 0;
  Element* own = grid.c + static_cast<std::int64_t>(me) * grid.n;
  for (int t = blockIdx.x; t < grid.tiles; t += gridDim.x) {
    const std::uint64_t wait_start = tracing ? trace_clock() : 0;
    if (ready != nullptr) iris::device::wait_until(block, ctx, ready + t, iris::cmp::ge, 1);
    const std::uint64_t push_start = tracing ? trace_clock() : 0;
    if (tracing && ready != nullptr)
      trace_record(trace, TraceKind::kWait, ctx.rank(), t, wait_start, push_start);
    const int i = t / grid.tiles_n, j = t % grid.tiles_n;
    const int rows = min(grid.tile_m, grid.m - i * grid.tile_m);
    const int cols = min(grid.tile_n, grid.n - j * grid.tile_n);
    Element* tile = own + static_cast<std::int64_t>(i) * grid.tile_m * grid.ldc + j * grid.tile_n;
    const iris::device::tile_view<Element> view{tile, static_cast<std::size_t>(rows),
                                                static_cast<std::size_t>(cols),
                                                static_cast<std::size_t>(grid.ldc)};
    std::uint64_t* flag = arrivals + static_cast<std::int64_t>(me) * grid.tiles + t;
    for (int s = 1; s < team.size; ++s) {
      const int to = team.world_rank((me + s) % team.size);
      iris::device::put(block, ctx, view, view, to, iris::device::signal_add(flag, 1));
    }
    block.sync();
    if (block.thread_rank() == 0) {
      iris::device::signal_add(ctx, flag, std::uint64_t{1}, ctx.rank());
      if (ready != nullptr) ready[t] = 0;
      if (tracing) trace_record(trace, TraceKind::kPush, ctx.rank(), t, push_start, trace_clock());
    }
  }
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
  std::unique_ptr<GemmRunner> gemm;
  std::unique_ptr<iris::ccl::Communicator> comm;  // bulk-synchronous: the team's all-gather
  TileGrid grid{};
  // [arrivals: team.size * tiles][ready: tiles][runs: 1]
  Buffer<std::uint64_t> flags;
  int sms = 0, gemm_sms = 0, comm_blocks = 0;
  cudaStream_t side = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
  TraceBuffer trace{};

  std::uint64_t* arrivals() const { return flags.data(); }
  std::uint64_t* ready() const { return flags.data() + std::int64_t{team.size} * grid.tiles; }
  std::uint64_t* runs() const { return ready() + grid.tiles; }

  ~AllScatterState() {
    if (fork) cudaEventDestroy(fork);
    if (join) cudaEventDestroy(join);
    if (side) cudaStreamDestroy(side);
  }
};

namespace {
iris::team resolve_team(const Context& ctx, const iris::team& team) {
  return team.size == 0 ? iris::team::world(ctx.world_size()) : team;
}

GemmArguments block_gemm(const GemmAllScatterArguments& a, const iris::team& team, int me) {
  GemmArguments g{};
  g.m = a.m;
  g.n = a.n;
  g.k = a.k;
  g.a = a.a;
  g.lda = a.lda;
  g.b = a.b;
  g.ldb = a.ldb;
  g.d = a.c == nullptr ? nullptr
                       : static_cast<void*>(static_cast<Element*>(a.c) + std::int64_t{me} * a.n);
  g.ldd = std::int64_t{a.n} * team.size;
  return g;
}

int device_sms() {
  int device = 0, sms = 0;
  IRIS_CUDA_CHECK(cudaGetDevice(&device));
  IRIS_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
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
  const iris::team team = detail::resolve_team(ctx, args.team);
  if (!team.fits(ctx.world_size()))
    return Status::failure("the team {start " + std::to_string(team.start) + ", size " +
                           std::to_string(team.size) + ", stride " + std::to_string(team.stride) +
                           "} does not fit a world of " + std::to_string(ctx.world_size()) +
                           " ranks");
  const int me = team.index_of(ctx.rank());
  if (me < 0)
    return Status::failure("rank " + std::to_string(ctx.rank()) + " is not a member of the team");
  if (args.c == nullptr || !ctx.contains(args.c))
    return Status::failure("C must be a symmetric buffer (from the Context's heap) on every rank");
  if (args.m > 0 && args.n > 0) {
    const auto* last =
        static_cast<const detail::Element*>(args.c) + std::int64_t{args.m} * args.n * team.size - 1;
    if (!ctx.contains(last))
      return Status::failure("C must hold M x N * team.size = " + std::to_string(args.m) + " x " +
                             std::to_string(std::int64_t{args.n} * team.size) +
                             " bf16 elements inside the symmetric heap");
  }
  if (args.gemm_sms < 0 || args.comm_blocks < 0)
    return Status::failure("gemm_sms and comm_blocks must be 0 (choose) or positive");
  if (args.pattern == AllScatterPattern::kProducerConsumer && args.gemm_sms == 1)
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
  // Until a table measured on the machine says otherwise, the fused epilogue: it needs no SM
  // split, no second stream and moves every tile once, while the GEMM still runs.
  s.pattern =
      args.pattern == AllScatterPattern::kAuto ? AllScatterPattern::kFusedSequential : args.pattern;
  const GemmArguments g = detail::block_gemm(args, s.team, s.me);
  s.gemm = s.pattern == AllScatterPattern::kBulkSynchronous
               ? detail::make_gemm(DType::kBF16, DType::kBF16)
               : detail::make_tile_store_gemm_bf16();
  auto& grid = s.grid;
  grid.c = static_cast<detail::Element*>(args.c);
  grid.m = args.m;
  grid.n = args.n;
  grid.ldc = g.ldd;
  grid.tile_m = s.gemm->tile_m();
  grid.tile_n = s.gemm->tile_n();
  grid.tiles_n = (args.n + grid.tile_n - 1) / grid.tile_n;
  grid.tiles = grid.tiles_n * ((args.m + grid.tile_m - 1) / grid.tile_m);

  const std::size_t flag_count = std::size_t(s.team.size + 1) * grid.tiles + 1;
  if (!s.flags || s.flags.size() != flag_count) {
    s.flags = {};  // collective free, then a collective allocation
    s.flags = ctx.zeros<std::uint64_t>(flag_count);
  }
  s.sms = detail::device_sms();

  GemmArguments gemm_args = g;
  if (s.pattern == AllScatterPattern::kBulkSynchronous) {
    if (!s.comm || s.comm->team() != s.team) {
      // Collective over the world, like the flags above; the smallest packet slots (the 2-D
      // all_gather uses none).
      const std::size_t packets = 2 * std::size_t(s.team.size) * 16;
      s.comm = {};
      s.comm = std::make_unique<iris::ccl::Communicator>(
          ctx, s.team, iris::ccl::CommunicatorOptions{.packet_bytes = (packets + 255) / 256 * 256});
    }
    s.gemm->initialize(gemm_args, nullptr, workspace, stream);
  } else if (s.pattern == AllScatterPattern::kFusedSequential) {
    detail::TileStore tiles{ctx.device(), s.team, s.arrivals(), std::int64_t{s.me} * grid.tiles,
                            s.me,         s.trace};
    s.gemm->initialize(gemm_args, &tiles, workspace, stream);
  } else {
    // Ranks sharing this GPU each keep comm_blocks spinning blocks resident: together they must
    // leave SMs for the GEMMs, or a GEMM CTA could wait forever for a whole free SM.
    int devices = 1;
    IRIS_CUDA_CHECK(cudaGetDeviceCount(&devices));
    const int sharing = std::max(1, (ctx.local_world_size() + devices - 1) / devices);
    s.gemm_sms = args.gemm_sms ? std::min(args.gemm_sms, s.sms) : s.sms - 16;
    const int left = std::max(2, s.sms - s.gemm_sms);
    s.comm_blocks = args.comm_blocks ? args.comm_blocks : std::max(1, left / sharing);
    gemm_args.sm_count = s.gemm_sms;
    detail::TileStore tiles{ctx.device(), iris::team{ctx.rank(), 1, 1}, s.ready(), 0, 0, s.trace};
    s.gemm->initialize(gemm_args, &tiles, workspace, stream);
    if (!s.side) {
      IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&s.side, cudaStreamNonBlocking));
      IRIS_CUDA_CHECK(cudaEventCreateWithFlags(&s.fork, cudaEventDisableTiming));
      IRIS_CUDA_CHECK(cudaEventCreateWithFlags(&s.join, cudaEventDisableTiming));
    }
  }
}

void GemmAllScatter::run(cudaStream_t stream) {
  auto& s = *state_;
  if (!s.gemm)
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
    case AllScatterPattern::kProducerConsumer:
      IRIS_CUDA_CHECK(cudaEventRecord(s.fork, stream));
      IRIS_CUDA_CHECK(cudaStreamWaitEvent(s.side, s.fork, 0));
      s.gemm->run(stream);
      detail::push_tiles<<<s.comm_blocks, detail::kPushThreads, 0, s.side>>>(
          dctx, s.team, s.me, s.grid, s.arrivals(), s.ready(), s.trace);
      IRIS_CUDA_CHECK(cudaGetLastError());
      IRIS_CUDA_CHECK(cudaEventRecord(s.join, s.side));
      IRIS_CUDA_CHECK(cudaStreamWaitEvent(stream, s.join, 0));
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
