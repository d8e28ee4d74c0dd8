// iris::ccl::Communicator: argument checks, algorithm selection and launch shapes. The kernels
// are in reduce_kernels.cu and move_kernels.cu.
#include "iris/ccl/communicator.hpp"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "ccl/checks.hpp"
#include "ccl/launch.hpp"
#include "ccl/selection.hpp"
#include "iris/ccl/detail/partition.hpp"
#include "iris/ccl/detail/workspace.hpp"
#include "iris/host/env.hpp"
#include "iris/host/error.hpp"

namespace iris::ccl {

namespace {

using detail::bounded;
using detail::in_packets;
using detail::kMaxChannels;
using detail::Plan;

/// What each rank tells the others at construction, to size the default SM budget.
struct PeerInfo {
  std::uint64_t host;
  char pci_bus[32];
  std::int32_t multiprocessors;
  std::int32_t max_blocks;          ///< the rank's CommunicatorOptions::max_blocks (0: default)
  std::int32_t resident_reduce;     ///< blocks of the reducing kernels one SM holds at once
  std::int32_t resident_move;       ///< the same for the movement kernel
  detail::CommunicatorSetup setup;  ///< what the members must agree on
};

/// The selection's hash: the table's JSON form and the forced algorithms.
std::uint64_t selection_hash(const TuningTable& table, const ForcedAlgorithms& forced) {
  std::uint64_t h = detail::stable_hash(table.to_json());
  for (Algorithm a : forced) h = detail::stable_hash(to_string(a), h);
  return h;
}

std::uint64_t host_hash() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return std::hash<std::string>{}(name);
}

std::size_t ceil_div(std::size_t a, std::size_t b) {
  return (a + b - 1) / b;
}
std::size_t round_up(std::size_t a, std::size_t b) {
  return ceil_div(a, b) * b;
}

/// Bytes of the accumulator of `type` (iris/ccl/detail/reduce.hpp): fp32 for the floating
/// types, 64 bits for the integers.
std::size_t accumulator_bytes(DataType type) {
  return type == DataType::kFloat32 || type == DataType::kFloat16 || type == DataType::kBFloat16
             ? 4
             : 8;
}

void check_enums(DataType type, ReduceOp op, const char* call) {
  if (static_cast<int>(type) < 0 || static_cast<int>(type) > static_cast<int>(DataType::kUInt8))
    throw Error(Errc::kInvalidArgument, std::string("iris::ccl::") + call + ": unknown DataType " +
                                            std::to_string(static_cast<int>(type)));
  if (static_cast<int>(op) < 0 || static_cast<int>(op) > static_cast<int>(ReduceOp::kAvg))
    throw Error(Errc::kInvalidArgument, std::string("iris::ccl::") + call + ": unknown ReduceOp " +
                                            std::to_string(static_cast<int>(op)));
}

}  // namespace

struct Communicator::State {
  Context* ctx = nullptr;
  iris::team team;
  int index = 0;
  CommunicatorOptions options;
  void* workspace = nullptr;
  /// Block c of every member meets on channel c (detail/sync.hpp); one channel per block of the
  /// largest grid a call launches.
  Barriers barriers;
  int move_in_flight = detail::kMoveInFlight;  ///< the movement kernel's vectors in flight
  /// Budgets, limits, the table and the forcing: what a call's shape is decided from.
  detail::Selector select;
  detail::HeapRange heap;

  device::Communicator handle() const {
    return {ctx->device(),    team, index, static_cast<std::byte*>(workspace), options.packet_bytes,
            barriers.device()};
  }

  Plan plan(Collective c, std::size_t bytes, const Options& options, bool in_place,
            const char* call) const {
    return select.plan(c, bytes, options, in_place, call);
  }

  void heap_check(const void* ptr, std::size_t bytes, const char* call, const char* name) const {
    detail::check_on_heap(heap, ptr, bytes, call, name);
  }

  /// This rank's staging (workspace.hpp), after the control block and the packet slots.
  void* staging() const {
    return static_cast<std::byte*>(workspace) + detail::kControlBytes + options.packet_bytes;
  }

  void make_current() const { IRIS_CUDA_CHECK(cudaSetDevice(ctx->cuda_device())); }

  /// Launch for a movement collective of parts of `bytes` bytes.
  void move(detail::MoveParams params, const Plan& plan, cudaStream_t stream) const {
    params.comm = handle();
    params.in_flight = move_in_flight;
    const std::size_t tile =
        round_up(ceil_div(std::max<std::size_t>(params.bytes, 1), plan.blocks), 256);
    params.tile = tile;
    int blocks = params.kind == detail::MoveKind::kAllToAllv
                     ? plan.blocks
                     : static_cast<int>(std::max<std::size_t>(1, ceil_div(params.bytes, tile)));
    if (params.kind == detail::MoveKind::kAllGather2d) {
      // Whole rows per block.
      params.tile = ceil_div(params.rows, std::min<std::size_t>(plan.blocks, params.rows));
      blocks = static_cast<int>(ceil_div(params.rows, params.tile));
    }
    // A send only announces its buffer and waits for the receiver: one block.
    if (params.kind == detail::MoveKind::kSend) blocks = 1;
    make_current();
    detail::launch_move(params, blocks, options.threads, stream);
  }
};

Communicator::Communicator(Context& ctx, const CommunicatorOptions& options)
    : Communicator(ctx, iris::team::world(ctx.world_size()), options) {}

Communicator::Communicator(Context& ctx, iris::team team, const CommunicatorOptions& options)
    : state_(std::make_unique<State>()) {
  detail::check_team(team, ctx.world_size(), ctx.rank());
  if (options.threads < 32 || options.threads > detail::kMaxThreads || options.threads % 32 != 0)
    throw Error(Errc::kInvalidArgument,
                "iris::ccl::Communicator: threads " + std::to_string(options.threads) +
                    " must be a multiple of 32 in 32.." + std::to_string(detail::kMaxThreads));
  if (options.max_blocks < 0 || options.max_blocks > kMaxChannels)
    throw Error(Errc::kInvalidArgument, "iris::ccl::Communicator: max_blocks " +
                                            std::to_string(options.max_blocks) + " is outside 0.." +
                                            std::to_string(kMaxChannels));
  if (options.staging_bytes % 256 != 0)
    throw Error(Errc::kInvalidArgument, "iris::ccl::Communicator: staging_bytes " +
                                            std::to_string(options.staging_bytes) +
                                            " must be a multiple of 256");
  const std::size_t min_packets = 2 * static_cast<std::size_t>(team.size) * detail::kPacketBytes;
  if (options.packet_bytes < min_packets || options.packet_bytes % 256 != 0)
    throw Error(Errc::kInvalidArgument,
                "iris::ccl::Communicator: packet_bytes " + std::to_string(options.packet_bytes) +
                    " must be a multiple of 256 and at least " + std::to_string(min_packets));
  State& s = *state_;
  s.ctx = &ctx;
  s.team = team;
  s.index = team.index_of(ctx.rank());
  s.options = options;

  // What selects the calls' algorithms and shapes, which every member must see alike.
  if (auto path = env::get(kTuningEnv)) {
    s.select.table = TuningTable::from_file(*path);
  } else {
    s.select.table = TuningTable::defaults();
  }
  if (auto forced = env::get(kAlgorithmEnv)) {
    s.select.forced = parse_forced_algorithms(*forced);
  } else {
    s.select.forced.fill(Algorithm::kAuto);
  }

  if (auto vectors = env::get(detail::kMoveVectorsEnv)) {
    if (*vectors != "4" && *vectors != "8")
      throw Error(Errc::kInvalidArgument, std::string(detail::kMoveVectorsEnv) + ": \"" +
                                              std::string(*vectors) + "\" is not 4 or 8");
    s.move_in_flight = *vectors == "4" ? 4 : 8;
  }

  // The SM budget, per kind of kernel: half the blocks of that kernel the GPU holds at once
  // (so that any two of the collectives' kernels are resident together: a send with its recv,
  // or calls of two communicators), shared among the ranks on the GPU, the smallest across the
  // team (every member must launch the same grids).
  IRIS_CUDA_CHECK(cudaSetDevice(ctx.cuda_device()));
  PeerInfo mine{};
  mine.host = host_hash();
  IRIS_CUDA_CHECK(cudaDeviceGetPCIBusId(mine.pci_bus, sizeof(mine.pci_bus), ctx.cuda_device()));
  IRIS_CUDA_CHECK(cudaDeviceGetAttribute(&mine.multiprocessors, cudaDevAttrMultiProcessorCount,
                                         ctx.cuda_device()));
  mine.max_blocks = options.max_blocks;
  mine.resident_reduce = detail::resident_reduce_blocks(options.threads);
  mine.resident_move = detail::resident_move_blocks(options.threads);
  mine.setup = {.team_start = team.start,
                .team_size = team.size,
                .team_stride = team.stride,
                .threads = options.threads,
                .move_in_flight = s.move_in_flight,
                .packet_bytes = options.packet_bytes,
                .staging_bytes = options.staging_bytes,
                .selection = selection_hash(s.select.table, s.select.forced)};
  std::vector<PeerInfo> all(ctx.world_size());
  ctx.bootstrap().allgather(&mine, all.data(), sizeof(PeerInfo));
  {
    std::vector<detail::CommunicatorSetup> setups;
    for (const PeerInfo& p : all) setups.push_back(p.setup);
    detail::check_setups_agree(setups, team, ctx.rank());
  }
  int reduce_budget = kMaxChannels, move_budget = kMaxChannels;
  detail::Selector& sel = s.select;
  sel.team_size = team.size;
  sel.packet_bytes = options.packet_bytes;
  sel.staging_bytes = options.staging_bytes;
  sel.block_limit = sel.move_block_limit = kMaxChannels;
  for (int k = 0; k < team.size; ++k) {
    const PeerInfo& p = all[team.world_rank(k)];
    int sharing = 0;
    for (const PeerInfo& q : all)
      sharing += q.host == p.host && std::strncmp(q.pci_bus, p.pci_bus, sizeof(p.pci_bus)) == 0;
    sharing = std::max(1, sharing);
    // Blocks of a kernel that each rank on p's GPU can keep resident at once.
    const auto resident = [&](int per_sm) {
      return std::max(1, p.multiprocessors * std::max(1, per_sm) / sharing);
    };
    for (auto [per_sm, kind] :
         {std::pair{p.resident_reduce, "reducing"}, std::pair{p.resident_move, "moving"}}) {
      if (p.max_blocks > resident(per_sm))
        throw Error(Errc::kInvalidArgument,
                    "iris::ccl::Communicator: max_blocks " + std::to_string(p.max_blocks) +
                        " of world rank " + std::to_string(team.world_rank(k)) +
                        " is more than the " + std::to_string(resident(per_sm)) +
                        " blocks of the " + kind + " collectives' kernel that each of the " +
                        std::to_string(sharing) + " ranks on its GPU can keep resident (" +
                        std::to_string(p.multiprocessors) + " SMs x " + std::to_string(per_sm) +
                        " per SM at " + std::to_string(options.threads) + " threads / " +
                        std::to_string(sharing) + " ranks" +
                        "): a call's blocks wait for every member's, so a larger grid can hang; "
                        "ask for fewer blocks, or fewer threads per block");
    }
    sel.block_limit = std::min(sel.block_limit, resident(p.resident_reduce));
    sel.move_block_limit = std::min(sel.move_block_limit, resident(p.resident_move));
    const auto own = [&](int per_sm) {
      return p.max_blocks > 0 ? p.max_blocks : std::max(1, resident(per_sm) / 2);
    };
    reduce_budget = std::min(reduce_budget, own(p.resident_reduce));
    move_budget = std::min(move_budget, own(p.resident_move));
  }
  sel.max_blocks = std::max(1, reduce_budget);
  sel.move_max_blocks = std::max(1, move_budget);

  const HeapInfo heap = ctx.heap();
  s.heap.begin = reinterpret_cast<std::uintptr_t>(heap.base) + heap.reserved;
  s.heap.end = reinterpret_cast<std::uintptr_t>(heap.base) + heap.size;

  const std::size_t bytes = detail::kControlBytes + options.packet_bytes + options.staging_bytes;
  s.workspace = ctx.allocate_bytes(bytes, 256);
  IRIS_CUDA_CHECK(cudaMemset(s.workspace, 0, bytes));
  // Collective over the world like the workspace (ranks outside the team get a handle they
  // never use); zeroed, with a barrier after, like zeros().
  s.barriers = ctx.make_barriers(team, kMaxChannels);
  ctx.barrier();  // every rank's workspace is zero before any kernel signals into it
}

Communicator::~Communicator() {
  if (!state_ || state_->workspace == nullptr) return;
  try {
    state_->ctx->barrier();
    state_->barriers = Barriers();  // frees, collectively, in the same order on every rank
    state_->ctx->free_bytes(state_->workspace);
  } catch (...) {
    // A device report has already been thrown to the caller of an earlier synchronization, or
    // the job is going down; freeing is collective and cannot be completed alone.
  }
}

Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&& other) noexcept {
  if (this != &other) {
    Communicator dying(std::move(*this));
    state_ = std::move(other.state_);
  }
  return *this;
}

const iris::team& Communicator::team() const {
  return state_->team;
}
int Communicator::index() const {
  return state_->index;
}
int Communicator::size() const {
  return state_->team.size;
}
int Communicator::max_blocks() const {
  return std::min(state_->select.max_blocks, state_->select.move_max_blocks);
}
int Communicator::max_blocks(Collective collective) const {
  return state_->select.budget(collective);
}

int Communicator::block_limit(Collective collective) const {
  return state_->select.limit(collective);
}
std::size_t Communicator::message_capacity(Algorithm algorithm) const {
  if (!bounded(algorithm))
    throw Error(Errc::kInvalidArgument,
                "iris::ccl::Communicator::message_capacity: " + std::string(to_string(algorithm)) +
                    " is not an all_reduce that stores its message in the workspace (one_shot, "
                    "two_shot_packets, one_shot_push)");
  return state_->select.message_capacity(algorithm);
}
std::string_view Communicator::cannot_run(Collective collective, Algorithm algorithm,
                                          std::size_t bytes, bool in_place) const {
  const char* why = state_->select.unfit(collective, algorithm, bytes, in_place);
  return why == nullptr ? std::string_view() : std::string_view(why);
}
device::Communicator Communicator::device() const {
  return state_->handle();
}
const TuningTable& Communicator::tuning() const {
  return state_->select.table;
}

Algorithm Communicator::select(Collective collective, std::size_t bytes, const Options& options,
                               bool in_place) const {
  return state_->plan(collective, bytes, options, in_place, "select").algorithm;
}

std::size_t Communicator::checked_bytes(std::size_t count, std::size_t element, const char* what) {
  return detail::checked_bytes(count, element, what);
}

// ---- reductions ------------------------------------------------------------------------------

void Communicator::all_reduce(void* dst, const void* src, std::size_t count, DataType type,
                              ReduceOp op, cudaStream_t stream, const Options& options) {
  const State& s = *state_;
  constexpr const char* kCall = "all_reduce";
  check_enums(type, op, kCall);
  const std::size_t es = size_of(type);
  const std::size_t bytes = detail::checked_bytes(count, es, kCall);
  if (count == 0) return;
  s.heap_check(src, bytes, kCall, "src");
  s.heap_check(dst, bytes, kCall, "dst");
  detail::check_aliasing(dst, bytes, src, bytes, true, kCall, "dst", "src",
                         "in place means dst == src");
  const bool in_place = dst == src;
  const Plan plan = s.plan(Collective::kAllReduce, bytes, options, in_place, kCall);
  s.make_current();
  if (in_packets(plan.algorithm)) {
    detail::PacketParams p{};
    p.comm = s.handle();
    p.op = op;
    p.dst = dst;
    p.src = src;
    p.count = count;
    const std::size_t packets = ceil_div(bytes, detail::kPacketPayload);
    p.tile_packets = ceil_div(packets, plan.blocks);
    p.slots_per_sender = detail::packets_per_sender(s.options.packet_bytes, s.team.size);
    if (plan.algorithm == Algorithm::kTwoShotPackets) {
      const detail::TwoShotSlots slots =
          detail::two_shot_slots(s.options.packet_bytes, s.team.size);
      p.two_shot = true;
      p.chunk_words = detail::two_shot_chunk_words(packets, s.team.size);
      p.results_slots = slots.results;
      p.contribution_slots = slots.contributions;
    }
    const int blocks = static_cast<int>(ceil_div(packets, p.tile_packets));
    detail::launch_all_reduce_packets(p, type, blocks, s.options.threads, stream);
    return;
  }
  detail::ReduceParams p{};
  p.comm = s.handle();
  p.kind = plan.algorithm == Algorithm::kOneShotPull   ? detail::ReduceKind::kAllReducePull
           : plan.algorithm == Algorithm::kOneShotPush ? detail::ReduceKind::kAllReducePush
                                                       : detail::ReduceKind::kAllReduceTwoShot;
  p.op = op;
  p.dst = dst;
  p.src = src;
  p.count = count;
  if (plan.algorithm == Algorithm::kOneShotPush) {
    p.staging = s.staging();
    p.row = detail::push_row_bytes(s.options.staging_bytes, s.team.size);
  }
  p.tile = round_up(ceil_div(count, plan.blocks), 256 / es);
  detail::launch_reduce(p, type, static_cast<int>(ceil_div(count, p.tile)), s.options.threads,
                        stream);
}

void Communicator::reduce_scatter(void* dst, const void* src, std::size_t count, DataType type,
                                  ReduceOp op, cudaStream_t stream, const Options& options) {
  const State& s = *state_;
  constexpr const char* kCall = "reduce_scatter";
  check_enums(type, op, kCall);
  const std::size_t es = size_of(type);
  const std::size_t bytes = detail::checked_bytes(count, es, kCall);
  const std::size_t all = detail::checked_product(bytes, s.team.size, kCall);
  if (count == 0) return;
  s.heap_check(src, all, kCall, "src");
  s.heap_check(dst, bytes, kCall, "dst");
  const void* mine = static_cast<const std::byte*>(src) + s.index * bytes;
  if (dst != mine)
    detail::check_aliasing(dst, bytes, src, all, false, kCall, "dst", "src",
                           "in place means dst == src + index() * count");
  const Plan plan = s.plan(Collective::kReduceScatter, bytes, options, dst == mine, kCall);
  const bool ring = plan.algorithm == Algorithm::kRing;
  // The ring gives every block kRingSlots staging slots of at least 256 bytes.
  const std::size_t most_blocks =
      ring ? s.options.staging_bytes / (detail::kRingSlots * std::size_t{256})
           : static_cast<std::size_t>(plan.blocks);
  const auto budget = static_cast<std::size_t>(plan.blocks) < most_blocks
                          ? static_cast<std::size_t>(plan.blocks)
                          : most_blocks;
  detail::ReduceParams p{};
  p.comm = s.handle();
  p.kind = ring ? detail::ReduceKind::kReduceScatterRing : detail::ReduceKind::kReduceScatter;
  p.op = op;
  p.dst = dst;
  p.src = src;
  p.count = count;
  p.tile = round_up(ceil_div(count, budget), 256 / es);
  const int blocks = static_cast<int>(ceil_div(count, p.tile));
  if (ring) {
    p.staging = s.staging();
    // Slots of whole 256-byte lines of accumulators, at most a block's share of a part.
    const std::size_t slot_bytes =
        s.options.staging_bytes / static_cast<std::size_t>(blocks) / detail::kRingSlots / 256 * 256;
    p.slot = std::min(slot_bytes / accumulator_bytes(type), p.tile);
    const std::size_t items = ceil_div(p.tile, p.slot) * static_cast<std::size_t>(s.team.size);
    if (items >= detail::kRingItems)
      throw Error(Errc::kInvalidArgument,
                  "iris::ccl::reduce_scatter: count " + std::to_string(count) + " takes the ring " +
                      std::to_string(items) + " staging rounds per block, more than the " +
                      std::to_string(detail::kRingItems) +
                      " one call may take; raise CommunicatorOptions::staging_bytes or "
                      "Options::max_blocks");
  }
  s.make_current();
  detail::launch_reduce(p, type, blocks, s.options.threads, stream);
}

void Communicator::reduce(void* dst, const void* src, std::size_t count, DataType type, ReduceOp op,
                          int root, cudaStream_t stream, const Options& options) {
  const State& s = *state_;
  constexpr const char* kCall = "reduce";
  check_enums(type, op, kCall);
  detail::check_root(root, s.team.size, kCall);
  const std::size_t es = size_of(type);
  const std::size_t bytes = detail::checked_bytes(count, es, kCall);
  if (count == 0) return;
  s.heap_check(src, bytes, kCall, "src");
  if (s.index == root) {
    s.heap_check(dst, bytes, kCall, "dst");
    detail::check_aliasing(dst, bytes, src, bytes, true, kCall, "dst", "src",
                           "in place means dst == src");
  }
  const Plan plan = s.plan(Collective::kReduce, bytes, options, dst == src, kCall);
  const bool push = plan.algorithm == Algorithm::kPush;
  detail::ReduceParams p{};
  p.comm = s.handle();
  p.kind = push ? detail::ReduceKind::kReducePush : detail::ReduceKind::kReduce;
  p.op = op;
  p.dst = dst;
  p.src = src;
  p.count = count;
  p.root = root;
  // The push: member k reduces shard k (detail::shard_of: the last may be short or empty, every
  // start 16-byte aligned), its blocks a tile each; the pull: the root's blocks, all of it.
  const std::size_t shard = push ? detail::shard_elements(count, s.team.size, es) : count;
  p.tile = round_up(ceil_div(shard, plan.blocks), 256 / es);
  s.make_current();
  detail::launch_reduce(p, type, static_cast<int>(ceil_div(shard, p.tile)), s.options.threads,
                        stream);
}

// ---- movement --------------------------------------------------------------------------------

void Communicator::all_gather_bytes(void* dst, const void* src, std::size_t bytes,
                                    cudaStream_t stream, const Options& options) {
  const State& s = *state_;
  constexpr const char* kCall = "all_gather";
  const std::size_t all = detail::checked_product(bytes, s.team.size, kCall);
  if (bytes == 0) return;
  s.heap_check(src, bytes, kCall, "src");
  s.heap_check(dst, all, kCall, "dst");
  const void* mine = static_cast<std::byte*>(dst) + s.index * bytes;
  if (src != mine)
    detail::check_aliasing(dst, all, src, bytes, false, kCall, "dst", "src",
                           "in place means src == dst + index() * count");
  const Plan plan = s.plan(Collective::kAllGather, bytes, options, src == mine, kCall);
  const detail::MoveParams p{
      .kind = plan.algorithm == Algorithm::kPush   ? detail::MoveKind::kAllGatherPush
              : plan.algorithm == Algorithm::kRing ? detail::MoveKind::kAllGatherRing
                                                   : detail::MoveKind::kAllGatherPull,
      .dst = static_cast<std::byte*>(dst),
      .src = static_cast<const std::byte*>(src),
      .bytes = bytes};
  s.move(p, plan, stream);
}

void Communicator::all_gather_2d_bytes(void* dst, std::size_t dst_pitch, const void* src,
                                       std::size_t src_pitch, std::size_t rows,
                                       std::size_t row_bytes, cudaStream_t stream,
                                       const Options& options) {
  const State& s = *state_;
  constexpr const char* kCall = "all_gather_2d";
  if (rows == 0 || row_bytes == 0) return;
  const std::size_t dst_row = detail::checked_product(row_bytes, s.team.size, kCall);
  if (dst_pitch < dst_row)
    throw Error(Errc::kInvalidArgument,
                "iris::ccl::all_gather_2d: dst_pitch " + std::to_string(dst_pitch) +
                    " is less than size() * row_bytes = " + std::to_string(dst_row));
  const bool in_place =
      src == static_cast<const std::byte*>(dst) + s.index * row_bytes && src_pitch == dst_pitch;
  if (!in_place && src_pitch < row_bytes)
    throw Error(Errc::kInvalidArgument,
                "iris::ccl::all_gather_2d: src_pitch " + std::to_string(src_pitch) +
                    " is less than row_bytes = " + std::to_string(row_bytes));
  // rows * pitch does not overflow, so neither do the spans (pitch >= the row's bytes).
  detail::checked_product(rows, dst_pitch, kCall);
  detail::checked_product(rows, std::max(src_pitch, row_bytes), kCall);
  const std::size_t dst_span = (rows - 1) * dst_pitch + dst_row;
  const std::size_t src_span = (rows - 1) * src_pitch + row_bytes;
  s.heap_check(dst, dst_span, kCall, "dst");
  s.heap_check(src, src_span, kCall, "src");
  if (!in_place)
    detail::check_aliasing(dst, dst_span, src, src_span, false, kCall, "dst", "src",
                           "in place means src == dst + index() * row_bytes with src_pitch == "
                           "dst_pitch");
  // It always pulls: a forced other algorithm is an error, and IRIS_CCL_ALGORITHM's all_gather
  // and the table's all_gather rows (for the 1-D form) do not apply.
  if (options.algorithm != Algorithm::kAuto && options.algorithm != Algorithm::kPull)
    throw Error(Errc::kInvalidArgument, "iris::ccl::all_gather_2d: algorithm " +
                                            std::string(to_string(options.algorithm)) +
                                            " (forced by Options::algorithm): all_gather_2d "
                                            "always pulls");
  Options pull = options;
  pull.algorithm = Algorithm::kPull;
  const Plan plan = s.plan(Collective::kAllGather, detail::checked_product(rows, row_bytes, kCall),
                           pull, in_place, kCall);
  const detail::MoveParams p{.kind = detail::MoveKind::kAllGather2d,
                             .dst = static_cast<std::byte*>(dst),
                             .src = static_cast<const std::byte*>(src),
                             .bytes = row_bytes,
                             .rows = rows,
                             .dst_pitch = dst_pitch,
                             .src_pitch = src_pitch};
  s.move(p, plan, stream);
}

void Communicator::all_to_all_bytes(void* dst, const void* src, std::size_t bytes,
                                    cudaStream_t stream, const Options& options) {
  const State& s = *state_;
  constexpr const char* kCall = "all_to_all";
  const std::size_t all = detail::checked_product(bytes, s.team.size, kCall);
  if (bytes == 0) return;
  s.heap_check(src, all, kCall, "src");
  s.heap_check(dst, all, kCall, "dst");
  detail::check_aliasing(dst, all, src, all, false, kCall, "dst", "src",
                         "all_to_all is out of place only");
  const Plan plan = s.plan(Collective::kAllToAll, bytes, options, false, kCall);
  const detail::MoveParams p{.kind = plan.algorithm == Algorithm::kPush
                                         ? detail::MoveKind::kAllToAllPush
                                         : detail::MoveKind::kAllToAll,
                             .dst = static_cast<std::byte*>(dst),
                             .src = static_cast<const std::byte*>(src),
                             .bytes = bytes};
  s.move(p, plan, stream);
}

void Communicator::all_to_allv_bytes(void* dst, const std::int64_t* recv_counts,
                                     const std::int64_t* recv_offsets, const void* src,
                                     const std::int64_t* send_counts,
                                     const std::int64_t* send_offsets, std::size_t element_bytes,
                                     cudaStream_t stream, const Options& options) {
  const State& s = *state_;
  constexpr const char* kCall = "all_to_allv";
  if (element_bytes == 0)
    throw Error(Errc::kInvalidArgument, "iris::ccl::all_to_allv: element_bytes is 0");
  const std::size_t table = s.team.size * sizeof(std::int64_t);
  s.heap_check(recv_counts, table, kCall, "recv_counts");
  s.heap_check(recv_offsets, table, kCall, "recv_offsets");
  s.heap_check(send_counts, table, kCall, "send_counts");
  s.heap_check(send_offsets, table, kCall, "send_offsets");
  s.heap_check(src, 1, kCall, "src");
  s.heap_check(dst, 1, kCall, "dst");
  if (dst == src)
    throw Error(Errc::kInvalidArgument,
                "iris::ccl::all_to_allv: dst == src; all_to_allv is "
                "out of place only");
  // Sizes live on the device: the budget decides the grid.
  Options opts = options;
  const Plan plan = s.plan(Collective::kAllToAllv, std::size_t{1} << 40, opts, false, kCall);
  const detail::MoveParams p{.kind = detail::MoveKind::kAllToAllv,
                             .dst = static_cast<std::byte*>(dst),
                             .src = static_cast<const std::byte*>(src),
                             .bytes = 0,
                             .recv_counts = recv_counts,
                             .recv_offsets = recv_offsets,
                             .send_counts = send_counts,
                             .send_offsets = send_offsets,
                             .element_bytes = element_bytes};
  s.move(p, plan, stream);
}

void Communicator::broadcast_bytes(void* dst, const void* src, std::size_t bytes, int root,
                                   cudaStream_t stream, const Options& options) {
  const State& s = *state_;
  constexpr const char* kCall = "broadcast";
  detail::check_root(root, s.team.size, kCall);
  if (bytes == 0) return;
  s.heap_check(src, bytes, kCall, "src");
  s.heap_check(dst, bytes, kCall, "dst");
  detail::check_aliasing(dst, bytes, src, bytes, true, kCall, "dst", "src",
                         "in place means dst == src");
  const Plan plan = s.plan(Collective::kBroadcast, bytes, options, dst == src, kCall);
  const detail::MoveParams p{.kind = detail::MoveKind::kBroadcast,
                             .dst = static_cast<std::byte*>(dst),
                             .src = static_cast<const std::byte*>(src),
                             .bytes = bytes,
                             .root = root};
  s.move(p, plan, stream);
}

void Communicator::gather_bytes(void* dst, const void* src, std::size_t bytes, int root,
                                cudaStream_t stream, const Options& options) {
  const State& s = *state_;
  constexpr const char* kCall = "gather";
  detail::check_root(root, s.team.size, kCall);
  const std::size_t all = detail::checked_product(bytes, s.team.size, kCall);
  if (bytes == 0) return;
  s.heap_check(src, bytes, kCall, "src");
  if (s.index == root) {
    s.heap_check(dst, all, kCall, "dst");
    const void* mine = static_cast<std::byte*>(dst) + s.index * bytes;
    if (src != mine)
      detail::check_aliasing(dst, all, src, bytes, false, kCall, "dst", "src",
                             "in place means src == dst + index() * count");
  }
  const Plan plan = s.plan(Collective::kGather, bytes, options, false, kCall);
  const detail::MoveParams p{.kind = plan.algorithm == Algorithm::kPush
                                         ? detail::MoveKind::kGatherPush
                                         : detail::MoveKind::kGather,
                             .dst = static_cast<std::byte*>(dst),
                             .src = static_cast<const std::byte*>(src),
                             .bytes = bytes,
                             .root = root};
  s.move(p, plan, stream);
}

void Communicator::scatter_bytes(void* dst, const void* src, std::size_t bytes, int root,
                                 cudaStream_t stream, const Options& options) {
  const State& s = *state_;
  constexpr const char* kCall = "scatter";
  detail::check_root(root, s.team.size, kCall);
  const std::size_t all = detail::checked_product(bytes, s.team.size, kCall);
  if (bytes == 0) return;
  s.heap_check(src, all, kCall, "src");
  s.heap_check(dst, bytes, kCall, "dst");
  // Only the root's src is read (every member pulls its part from it), so only the root's dst
  // must keep clear of it: a check on the others would fail on some members only, and leave
  // the rest waiting.
  const void* mine = static_cast<const std::byte*>(src) + s.index * bytes;
  if (s.index == root && dst != mine)
    detail::check_aliasing(dst, bytes, src, all, false, kCall, "dst", "src",
                           "in place (on the root only) means dst == src + root * count");
  const Plan plan = s.plan(Collective::kScatter, bytes, options, false, kCall);
  const detail::MoveParams p{.kind = detail::MoveKind::kScatter,
                             .dst = static_cast<std::byte*>(dst),
                             .src = static_cast<const std::byte*>(src),
                             .bytes = bytes,
                             .root = root};
  s.move(p, plan, stream);
}

void Communicator::send_bytes(const void* src, std::size_t bytes, int peer, cudaStream_t stream,
                              const Options& options) {
  const State& s = *state_;
  constexpr const char* kCall = "send";
  detail::check_root(peer, s.team.size, kCall, "peer");
  if (peer == s.index)
    throw Error(Errc::kInvalidArgument, "iris::ccl::send: peer is this rank's own index");
  // An empty message still meets its recv: the pair's sequence stays in step.
  if (bytes != 0) s.heap_check(src, bytes, kCall, "src");
  const Plan plan = s.plan(Collective::kSendRecv, bytes, options, false, kCall);
  const detail::MoveParams p{.kind = detail::MoveKind::kSend,
                             .src = static_cast<const std::byte*>(src),
                             .bytes = bytes,
                             .peer = s.team.world_rank(peer)};
  s.move(p, plan, stream);
}

void Communicator::recv_bytes(void* dst, std::size_t bytes, int peer, cudaStream_t stream,
                              const Options& options) {
  const State& s = *state_;
  constexpr const char* kCall = "recv";
  detail::check_root(peer, s.team.size, kCall, "peer");
  if (peer == s.index)
    throw Error(Errc::kInvalidArgument, "iris::ccl::recv: peer is this rank's own index");
  if (bytes != 0) s.heap_check(dst, bytes, kCall, "dst");
  const Plan plan = s.plan(Collective::kSendRecv, bytes, options, false, kCall);
  const detail::MoveParams p{.kind = detail::MoveKind::kRecv,
                             .dst = static_cast<std::byte*>(dst),
                             .bytes = bytes,
                             .peer = s.team.world_rank(peer)};
  s.move(p, plan, stream);
}

void Communicator::barrier(cudaStream_t stream) {
  const State& s = *state_;
  s.make_current();
  detail::launch_barrier(s.handle(), stream);
}

}  // namespace iris::ccl
