// iris::ops::GemmAllReduceRmsNorm: iris::ops::Gemm into a symmetric buffer, then
// iris::ops::AllReduceRmsNorm on it. No kernel of its own.
#include "iris/ops/gemm_allreduce_rmsnorm.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "iris/host/error.hpp"
#include "iris/ops/detail/comm_op.hpp"

namespace iris::ops {

namespace detail {

struct GemmAllReduceRmsNormState {
  Context* ctx = nullptr;
  GemmAllReduceRmsNormArguments args{};
  std::optional<Gemm> gemm;
  std::optional<AllReduceRmsNorm> norm;
  void* partial = nullptr;  // symmetric, M x N of the element type
  std::size_t partial_bytes = 0;

  void release_partial() {
    if (partial != nullptr) ctx->free_bytes(partial);  // collective, like the allocation
    partial = nullptr;
    partial_bytes = 0;
  }
  // Collective (the frees are): this rank's device work is waited for first; the norm (its own
  // collective destruction) goes before the buffer it reads.
  ~GemmAllReduceRmsNormState() {
    if (partial != nullptr) cudaDeviceSynchronize();
    norm.reset();
    try {
      release_partial();
    } catch (...) {
      // a destructor must not throw; the heap reports the leak at teardown
    }
  }
};

namespace {

/// Stands in for the symmetric buffer before it exists: aligned, and at an address no device
/// allocation has, so the norm's overlap checks see only the caller's tensors.
void* placeholder_partial() {
  return reinterpret_cast<void*>(std::uintptr_t{256});
}

/// The partial product (detail::partial_gemm) in the op's element type.
GemmArguments typed_partial_gemm(const GemmAllReduceRmsNormArguments& a, void* d) {
  GemmArguments g = partial_gemm(a, d);
  g.a_type = g.b_type = g.d_type = a.type;
  return g;
}

AllReduceRmsNormArguments norm_arguments(const GemmAllReduceRmsNormArguments& a, const void* x) {
  AllReduceRmsNormArguments n{};
  n.tokens = a.m;
  n.hidden = a.n;
  n.type = a.type;
  n.x = x;
  n.residual = a.residual;
  n.gamma = a.gamma;
  n.residual_out = a.residual_out;
  n.y = a.y;
  n.eps = a.eps;
  n.y_type = a.y_type;
  n.y_scale = a.y_scale;
  n.team = a.team;
  n.pattern = a.pattern;
  n.max_blocks = a.max_blocks;
  return n;
}

}  // namespace

}  // namespace detail

GemmAllReduceRmsNorm::GemmAllReduceRmsNorm(Context& ctx)
    : state_(std::make_unique<detail::GemmAllReduceRmsNormState>()) {
  state_->ctx = &ctx;
}
GemmAllReduceRmsNorm::~GemmAllReduceRmsNorm() = default;
GemmAllReduceRmsNorm::GemmAllReduceRmsNorm(GemmAllReduceRmsNorm&&) noexcept = default;
GemmAllReduceRmsNorm& GemmAllReduceRmsNorm::operator=(GemmAllReduceRmsNorm&&) noexcept = default;

Status GemmAllReduceRmsNorm::can_implement(const GemmAllReduceRmsNormArguments& args) {
  // The norm first: it names the type, M (tokens) and N (hidden) rules and the tensors.
  if (auto status = AllReduceRmsNorm::can_implement(
          detail::norm_arguments(args, detail::placeholder_partial()));
      !status)
    return status;
  if (auto status =
          Gemm::can_implement(detail::typed_partial_gemm(args, detail::placeholder_partial()));
      !status)
    return Status::failure("the GEMM: " + status.message);
  return Status::success();
}

Status GemmAllReduceRmsNorm::can_implement(const Context& ctx,
                                           const GemmAllReduceRmsNormArguments& args) {
  if (auto status = can_implement(args); !status) return status;
  int me = -1;
  return detail::check_membership(ctx, detail::resolve_team(ctx, args.team), me);
}

std::size_t GemmAllReduceRmsNorm::workspace_size(const GemmAllReduceRmsNormArguments&) {
  return 0;
}

void GemmAllReduceRmsNorm::initialize(const GemmAllReduceRmsNormArguments& args, void* workspace,
                                      cudaStream_t stream) {
  auto& s = *state_;
  Context& ctx = *s.ctx;
  if (auto status = can_implement(ctx, args); !status)
    throw Error(Errc::kInvalidArgument, "iris::ops::GemmAllReduceRmsNorm: " + status.message);
  // Symmetric allocations are collective: the same ones, in the same order, on every member.
  const std::size_t bytes = std::size_t(args.m) * args.n * size_of(args.type);
  if (s.partial_bytes != bytes) {
    if (s.partial != nullptr) {
      IRIS_CUDA_CHECK(cudaDeviceSynchronize());  // no kernel of this rank still reads it
      s.release_partial();
    }
    s.partial = ctx.allocate_bytes(bytes);
    s.partial_bytes = bytes;
  }
  s.args = args;
  if (!s.gemm) s.gemm.emplace();
  // The op's workspace is 0 bytes: the GEMM owns the one its configuration needs.
  (void)workspace;
  s.gemm->initialize(detail::typed_partial_gemm(args, s.partial), nullptr, stream);
  auto norm_args = detail::norm_arguments(args, s.partial);
  if (norm_args.max_blocks == 0) {
    // The fused norm's blocks spin until every member's GEMM is done; with ranks sharing a GPU,
    // all of them together take at most 64 SMs' worth, so the late members' GEMMs (a CTA needs
    // a whole SM) always find SMs.
    const int sharing = detail::ranks_per_gpu(ctx);
    if (sharing > 1) norm_args.max_blocks = std::max(1, 64 / sharing);
  }
  if (!s.norm) s.norm.emplace(ctx);
  s.norm->initialize(norm_args, nullptr, stream);
}

void GemmAllReduceRmsNorm::run(cudaStream_t stream) {
  auto& s = *state_;
  if (!s.norm)
    throw Error(Errc::kInvalidArgument, "iris::ops::GemmAllReduceRmsNorm::run before initialize");
  s.gemm->run(stream);  // this rank's partial product, the norm's x
  s.norm->run(stream);
}

AllReduceNormPattern GemmAllReduceRmsNorm::pattern() const {
  return state_->norm ? state_->norm->pattern() : AllReduceNormPattern::kAuto;
}
int GemmAllReduceRmsNorm::blocks() const {
  return state_->norm ? state_->norm->blocks() : 0;
}

}  // namespace iris::ops
