// iris::ops::AllGatherGemm: the host op. The patterns compose what exists: iris::ccl's
// all_gather and barrier, the copy engines, the plain bf16 GEMM (one runner per shard for
// producer-consumer) and the shard-waiting GEMM (fused-mainloop); no kernels of their own but
// the one that resolves the peers' shard addresses once in initialize() and the one that counts
// the fused-mainloop runs.
#include "iris/ops/all_gather_gemm.hpp"

#include <cuda_bf16.h>

#include <algorithm>
#include <string>
#include <vector>

#include "iris/ccl/communicator.hpp"
#include "iris/host/error.hpp"
#include "iris/ops/detail/comm_op.hpp"
#include "iris/ops/detail/gemm_runner.hpp"
#include "iris/ops/detail/shard_wait.hpp"
#include "iris/ops/detail/tuning.hpp"

namespace iris::ops {

std::string_view to_string(AllGatherPattern pattern) noexcept {
  switch (pattern) {
    case AllGatherPattern::kAuto:
      return "auto";
    case AllGatherPattern::kBulkSynchronous:
      return "bulk_synchronous";
    case AllGatherPattern::kProducerConsumer:
      return "producer_consumer";
    case AllGatherPattern::kFusedMainloop:
      return "fused_mainloop";
  }
  return "?";
}

namespace detail {

using AgElement = __nv_bfloat16;
/// kAuto: producer-consumer from shards of this many rows (one row of 128-row tiles).
constexpr int kMinShardRows = 128;

/// Where member q's copy of `shard` lies in this process: translated on the device, where the
/// Context's peer table lives.
__global__ void shard_addresses(const __grid_constant__ iris::device::Context ctx, iris::team team,
                                const AgElement* shard, const AgElement** out) {
  for (int q = threadIdx.x; q < team.size; q += blockDim.x)
    out[q] = ctx.translate(shard, team.world_rank(q));
}

/// Fused-mainloop: this run's number, one more than the last (graph replays count too: the
/// number lives here, not in the captured copies that write it into the shards' flags).
__global__ void next_epoch(std::uint64_t* epoch) {
  *epoch += 1;
}

struct AllGatherState {
  Context* ctx = nullptr;
  AllGatherGemmArguments args{};
  iris::team team{};
  int me = 0;
  int rows = 0;  // M / team.size
  AllGatherPattern pattern = AllGatherPattern::kAuto;
  std::unique_ptr<iris::ccl::Communicator> comm;  // all_gather, or the barriers
  Buffer<AgElement> gathered;                     // M x K: shard q at rows q * rows
  // Bulk-synchronous: one GEMM of all rows. Producer-consumer: one per shard, team order.
  std::vector<std::unique_ptr<GemmRunner>> gemms;
  std::vector<const AgElement*> peer_shards;  // member q's shard, here (not bulk-synchronous)
  // Fused-mainloop: one GEMM of all rows whose mainloop waits for each shard's flag.
  std::unique_ptr<ShardWaitGemm> waiting;
  Buffer<std::uint64_t> shard_flags;  // [flag of shard q: team.size][epoch: 1], symmetric
  std::uint64_t* epoch() const { return shard_flags.data() + team.size; }
  detail::SideStream copies;         // the copy engines' stream (not bulk-synchronous)
  std::vector<cudaEvent_t> arrived;  // producer-consumer: shard q is here

  void release_events() {
    for (cudaEvent_t e : arrived) cudaEventDestroy(e);
    arrived.clear();
  }
  ~AllGatherState() { release_events(); }
};

namespace {
/// kAuto's rule where no table answers.
AllGatherPattern rule(int m, int members, int sharing) {
  // Measured with ranks sharing one GPU: the copy engines and the per-shard GEMMs compete for
  // the same HBM and SMs, and bulk-synchronous wins (docs/ops.md has the figures).
  if (sharing > 1) return AllGatherPattern::kBulkSynchronous;
  return members > 1 && m / members >= kMinShardRows ? AllGatherPattern::kProducerConsumer
                                                     : AllGatherPattern::kBulkSynchronous;
}

/// C's rows [row0, row0 + rows) = A (rows x K, packed) * B^T.
GemmArguments rows_gemm(const AllGatherGemmArguments& x, const void* a, int row0, int rows) {
  GemmArguments g{};
  g.m = rows;
  g.n = x.n;
  g.k = x.k;
  g.a = a;
  g.lda = x.k;
  g.b = x.b;
  g.ldb = x.ldb;
  const std::int64_t ldc = x.ldc != 0 ? x.ldc : x.n;
  g.d = static_cast<AgElement*>(x.c) + std::int64_t{row0} * ldc;
  g.ldd = ldc;
  return g;
}
}  // namespace

}  // namespace detail

AllGatherGemm::AllGatherGemm(Context& ctx) : state_(std::make_unique<detail::AllGatherState>()) {
  state_->ctx = &ctx;
}
AllGatherGemm::~AllGatherGemm() = default;
AllGatherGemm::AllGatherGemm(AllGatherGemm&&) noexcept = default;
AllGatherGemm& AllGatherGemm::operator=(AllGatherGemm&&) noexcept = default;

AllGatherPattern AllGatherGemm::choose(const Context& ctx, const AllGatherGemmArguments& args) {
  if (args.pattern != AllGatherPattern::kAuto) return args.pattern;
  const int members = std::max(1, detail::resolve_team(ctx, args.team).size);
  // The measured table (IRIS_OPS_TUNING; none compiled in) for (W, M of all ranks, N per rank,
  // K), as the benchmark reports them, else the rule. Every pattern runs every problem.
  return detail::OpsTuning::current()
      .choose(members, args.m, args.n, args.k,
              detail::rule(args.m, members, detail::ranks_per_gpu(ctx)),
              [](AllGatherPattern) { return true; })
      .pattern;
}

Status AllGatherGemm::can_implement(const Context& ctx, const AllGatherGemmArguments& args) {
  const iris::team team = detail::resolve_team(ctx, args.team);
  int me = -1;
  if (auto status = detail::check_membership(ctx, team, me); !status) return status;
  if (args.m <= 0 || args.m % team.size != 0)
    return Status::failure("M = " + std::to_string(args.m) + " does not split into " +
                           std::to_string(team.size) +
                           " equal row shards; M must be a positive multiple of the team size");
  const int rows = args.m / team.size;
  if (args.a == nullptr || !ctx.contains(args.a))
    return Status::failure(
        "A's shard must be a symmetric buffer (from the Context's heap) on every rank: peers read "
        "it");
  if (args.k > 0) {
    const auto* last =
        static_cast<const detail::AgElement*>(args.a) + std::int64_t{rows} * args.k - 1;
    if (!ctx.contains(last))
      return Status::failure("A's shard must hold M / team.size x K = " + std::to_string(rows) +
                             " x " + std::to_string(args.k) +
                             " bf16 elements inside the symmetric heap");
  }
  // Every GEMM (one of all rows, or one per shard) has the rest of the rules; the shard's rows
  // as the A of one stands in for them all.
  const GemmArguments g = detail::rows_gemm(args, args.a, 0, rows);
  if (auto status = Gemm::can_implement(g); !status) return status;
  return Gemm::can_implement(detail::rows_gemm(args, args.a, args.m - rows, rows));
}

std::size_t AllGatherGemm::workspace_size(const AllGatherGemmArguments&) {
  return 0;
}

void AllGatherGemm::initialize(const AllGatherGemmArguments& args, void*, cudaStream_t stream) {
  auto& s = *state_;
  Context& ctx = *s.ctx;
  if (auto status = can_implement(ctx, args); !status)
    throw Error(Errc::kInvalidArgument, "iris::ops::AllGatherGemm: " + status.message);
  s.args = args;
  s.team = detail::resolve_team(ctx, args.team);
  s.me = s.team.index_of(ctx.rank());
  s.rows = args.m / s.team.size;
  s.pattern = choose(ctx, args);

  // Symmetric allocations are collective: every member makes the same ones in the same order.
  detail::ensure_communicator(ctx, s.comm, s.team);
  detail::ensure_zeros(ctx, s.gathered, std::size_t(args.m) * args.k);
  const std::int64_t shard = std::int64_t{s.rows} * args.k;

  s.gemms.clear();
  s.waiting = {};
  if (s.pattern == AllGatherPattern::kBulkSynchronous) {
    s.gemms.push_back(detail::make_gemm(DType::kBF16, DType::kBF16));
    s.gemms[0]->initialize(detail::rows_gemm(args, s.gathered.data(), 0, args.m), nullptr, nullptr,
                           stream);
    return;
  }
  if (s.pattern == AllGatherPattern::kFusedMainloop) {
    // Collective over the world, like the gathered A above.
    detail::ensure_zeros(ctx, s.shard_flags, std::size_t(s.team.size) + 1);
    s.waiting = detail::make_shard_wait_gemm_bf16();
    GemmArguments g = detail::rows_gemm(args, s.gathered.data(), 0, args.m);
    // Its CTAs spin until their shards' flags rise. With ranks sharing this GPU, every rank's
    // waiting GEMM must be resident beside the others' and leave SMs free for the other ranks'
    // barrier kernels (their copies start only after them), as every spinning kernel here does:
    // each gets an even share of all SMs but four (whole 2 x 1 clusters). Seen with full-GPU
    // grids on the H200 under MPS: at 8 ranks (and at 4 with larger shapes) the shards' flags
    // never rose until the timeout. One rank per GPU keeps the whole GPU.
    if (const int sharing = detail::ranks_per_gpu(ctx); sharing > 1)
      g.sm_count = std::max(2, (detail::device_sms() - 4) / sharing / 2 * 2);
    if (auto status = s.waiting->can_implement(g); !status)
      throw Error(Errc::kInvalidArgument, "iris::ops::AllGatherGemm: " + status.message);
    detail::ShardWait wait{};
    wait.ctx = ctx.device();
    wait.flags = s.shard_flags.data();
    wait.epoch = s.epoch();
    wait.rows = s.rows;
    wait.shards = s.team.size;
    wait.first_shard = s.me;
    s.waiting->initialize(g, wait, stream);
  } else {
    for (int q = 0; q < s.team.size; ++q) {
      const void* a = q == s.me ? args.a : static_cast<const void*>(s.gathered.data() + q * shard);
      s.gemms.push_back(detail::make_gemm(DType::kBF16, DType::kBF16));
      s.gemms.back()->initialize(detail::rows_gemm(args, a, q * s.rows, s.rows), nullptr, nullptr,
                                 stream);
    }
  }
  // The members' shards in this process's address space, once.
  const detail::AgElement** addresses = nullptr;
  IRIS_CUDA_CHECK(cudaMalloc(&addresses, sizeof(void*) * s.team.size));
  detail::shard_addresses<<<1, 32, 0, stream>>>(
      ctx.device(), s.team, static_cast<const detail::AgElement*>(args.a), addresses);
  IRIS_CUDA_CHECK(cudaGetLastError());
  s.peer_shards.assign(s.team.size, nullptr);
  IRIS_CUDA_CHECK(cudaMemcpyAsync(s.peer_shards.data(), addresses, sizeof(void*) * s.team.size,
                                  cudaMemcpyDeviceToHost, stream));
  IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
  IRIS_CUDA_CHECK(cudaFree(addresses));

  s.copies.create();
  s.release_events();
  s.arrived.assign(s.team.size, nullptr);
  for (auto& e : s.arrived) IRIS_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
}

void AllGatherGemm::run(cudaStream_t stream) {
  auto& s = *state_;
  if (s.gemms.empty() && !s.waiting)
    throw Error(Errc::kInvalidArgument, "iris::ops::AllGatherGemm::run before initialize");
  const std::size_t shard = std::size_t(s.rows) * s.args.k;
  if (s.pattern == AllGatherPattern::kBulkSynchronous) {
    s.comm->all_gather(s.gathered.data(), static_cast<const detail::AgElement*>(s.args.a), shard,
                       stream);
    s.gemms[0]->run(stream);
    return;
  }
  const std::size_t shard_bytes = shard * sizeof(detail::AgElement);
  if (s.pattern == AllGatherPattern::kFusedMainloop) {
    // This run's number first; then the team barrier (every member's shard is ready) on
    // `stream`, before the GEMM: the GEMM's waiting CTAs hold every SM, so nothing that its
    // flags depend on may need one. After the fork only the copy engines feed the flags.
    detail::next_epoch<<<1, 1, 0, stream>>>(s.epoch());
    IRIS_CUDA_CHECK(cudaGetLastError());
    if (s.team.size > 1) s.comm->barrier(stream);
    const cudaStream_t copies = s.copies.fork(stream);
    // The local shard, then the peers' from rank + 1 on; each copy is followed (stream order: the
    // next copy starts once the last one's writes are done) by the copy of this run's number
    // into the shard's flag, which the GEMM's mainloop waits for.
    for (int j = 0; j < s.team.size; ++j) {
      const int q = (s.me + j) % s.team.size;
      IRIS_CUDA_CHECK(cudaMemcpyAsync(s.gathered.data() + q * shard, s.peer_shards[q], shard_bytes,
                                      cudaMemcpyDeviceToDevice, copies));
      IRIS_CUDA_CHECK(cudaMemcpyAsync(s.shard_flags.data() + q, s.epoch(), sizeof(std::uint64_t),
                                      cudaMemcpyDeviceToDevice, copies));
    }
    // Every member has read this rank's shard. On the communication stream, so that a run ends
    // without waiting for the peers' GEMMs; it needs an SM, which the GEMM frees once all its
    // flags have risen (they have, by then).
    if (s.team.size > 1) s.comm->barrier(copies);
    s.waiting->run(stream);
    s.copies.join(stream);  // graphs need it
    return;
  }
  // Fork: the communication stream starts after everything queued on `stream` so far (this
  // rank's shard is written).
  const cudaStream_t copies = s.copies.fork(stream);
  s.gemms[s.me]->run(stream);  // the local shard needs nobody
  if (s.team.size > 1) {
    s.comm->barrier(copies);  // every member's shard is ready
    for (int j = 1; j < s.team.size; ++j) {
      const int q = (s.me + j) % s.team.size;
      IRIS_CUDA_CHECK(cudaMemcpyAsync(s.gathered.data() + q * shard, s.peer_shards[q], shard_bytes,
                                      cudaMemcpyDeviceToDevice, copies));
      IRIS_CUDA_CHECK(cudaEventRecord(s.arrived[q], copies));
    }
    s.comm->barrier(copies);  // every member has read this rank's shard
  }
  for (int j = 1; j < s.team.size; ++j) {
    const int q = (s.me + j) % s.team.size;
    IRIS_CUDA_CHECK(cudaStreamWaitEvent(stream, s.arrived[q], 0));
    s.gemms[q]->run(stream);
  }
  s.copies.join(stream);  // graphs need it
}

AllGatherPattern AllGatherGemm::pattern() const {
  return state_->pattern;
}
const void* AllGatherGemm::gathered_a() const {
  return state_->gathered.data();
}

}  // namespace iris::ops
