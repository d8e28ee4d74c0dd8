// iris::ops::AllReduceRmsNorm: the host op, the fused kernel (pull the members' rows through
// translate, add the residual, RMSNorm, in registers) and the residual + RMSNorm kernel of the
// bulk-synchronous pattern. Needs no CUTLASS header.
#include "iris/ops/allreduce_rmsnorm.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "iris/ccl/communicator.hpp"
#include "iris/device/barrier.hpp"
#include "iris/device/context.hpp"
#include "iris/host/error.hpp"
#include "iris/ops/detail/comm_op.hpp"

namespace iris::ops {

std::string_view to_string(AllReduceNormPattern pattern) noexcept {
  switch (pattern) {
    case AllReduceNormPattern::kAuto:
      return "auto";
    case AllReduceNormPattern::kBulkSynchronous:
      return "bulk_synchronous";
    case AllReduceNormPattern::kFused:
      return "fused";
  }
  return "?";
}

std::string_view to_string(NormOutput output) noexcept {
  switch (output) {
    case NormOutput::kInput:
      return "input";
    case NormOutput::kFp8E4M3:
      return "fp8_e4m3";
  }
  return "?";
}

namespace detail {

constexpr unsigned kNormThreads = 512;  // two blocks fit on an SM (launch bounds below)
constexpr int kNormChannels = 64;       // barrier channels: the largest grid
constexpr int kVector = 8;              // elements per 16-byte load

template <class T>
struct Element;
template <>
struct Element<__nv_bfloat16> {
  static __device__ float load(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
};
template <>
struct Element<__half> {
  static __device__ float load(__half v) { return __half2float(v); }
  static __device__ __half store(float v) { return __float2half_rn(v); }
};

/// Eight elements in one 16-byte word.
template <class T>
union Pack {
  uint4 word;
  T e[kVector];
};

template <class T>
__device__ Pack<T> load_pack(const T* p) {
  Pack<T> pack;
  pack.word = *reinterpret_cast<const uint4*>(p);
  return pack;
}
template <class T>
__device__ void store_pack(T* p, const Pack<T>& pack) {
  *reinterpret_cast<uint4*>(p) = pack.word;
}

/// Sum of `value` over the block, in a fixed order (a butterfly in each warp, then the warps in
/// index order), so that every rank gets the same bits. Every thread gets the result.
__device__ float block_sum(float value) {
  __shared__ float partial[kNormThreads / 32];
  __shared__ float total;
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) partial[warp] = value;
  __syncthreads();
  if (threadIdx.x == 0) {
    float sum = 0.f;
    for (unsigned w = 0; w < blockDim.x / 32; ++w) sum += partial[w];
    total = sum;
  }
  __syncthreads();
  const float result = total;
  __syncthreads();  // partial and total are reused by the next row
  return result;
}

struct NormParams {
  int tokens = 0, hidden = 0;
  float eps = 0.f;
  float y_scale = 1.f;        // fp8 output: the divisor before the conversion
  const void* x = nullptr;    // fused: this rank's symmetric partial sums
  const void* sum = nullptr;  // bulk-synchronous: the all-reduced sum (local)
  const void* residual = nullptr;
  const void* gamma = nullptr;
  void* residual_out = nullptr;
  void* y = nullptr;
};

/// Eight e4m3 bytes in one 8-byte word.
union Fp8Pack {
  uint2 word;
  __nv_fp8_storage_t e[kVector];
};

/// Second pass over a row: y = residual_out * rsqrt(mean of squares + eps) * gamma, reading
/// back the residual_out this thread wrote; kFp8: then divided by y_scale and converted to e4m3
/// (round to nearest even, saturating to +-448).
template <class T, bool kFp8>
__device__ void normalize_row(const NormParams& p, std::int64_t row0, float sum_of_squares) {
  const float scale = rsqrtf(sum_of_squares / static_cast<float>(p.hidden) + p.eps);
  const T* out = static_cast<const T*>(p.residual_out) + row0;
  const T* gamma = static_cast<const T*>(p.gamma);
  for (int i = threadIdx.x * kVector; i < p.hidden; i += blockDim.x * kVector) {
    const Pack<T> v = load_pack(out + i), g = load_pack(gamma + i);
    if constexpr (kFp8) {
      Fp8Pack q;
#pragma unroll
      for (int e = 0; e < kVector; ++e) {
        const float normed = Element<T>::load(v.e[e]) * scale * Element<T>::load(g.e[e]);
        q.e[e] = __nv_cvt_float_to_fp8(__fdiv_rn(normed, p.y_scale), __NV_SATFINITE, __NV_E4M3);
      }
      *reinterpret_cast<uint2*>(static_cast<__nv_fp8_storage_t*>(p.y) + row0 + i) = q.word;
    } else {
      Pack<T> r;
#pragma unroll
      for (int e = 0; e < kVector; ++e)
        r.e[e] = Element<T>::store(Element<T>::load(v.e[e]) * scale * Element<T>::load(g.e[e]));
      store_pack(static_cast<T*>(p.y) + row0 + i, r);
    }
  }
}

/// The fused pattern. Block b meets block b of every member on barrier channel b (the members'
/// x are ready: they were written before their kernels), reads row t of every member's x in team
/// order for its rows t = b, b + grid, ..., adds the residual, stores residual_out and normalizes;
/// it announces that it is done reading the peers' x before the last row's y, and waits for the
/// peers' blocks b to be done reading this rank's x before it returns.
template <class T, bool kFp8>
__global__ void __launch_bounds__(kNormThreads, 2)
    allreduce_rmsnorm_fused(const __grid_constant__ iris::device::Context ctx,
                            iris::device::Barriers bars, iris::team team, NormParams p) {
  const iris::block block{};
  const int channel = static_cast<int>(blockIdx.x);
  iris::device::sync(block, ctx, bars, channel);
  const T* x = static_cast<const T*>(p.x);
  const T* residual = static_cast<const T*>(p.residual);
  T* residual_out = static_cast<T*>(p.residual_out);
  iris::device::barrier_token done{channel, 0};  // set at the block's last row (it has one)
  for (int t = blockIdx.x; t < p.tokens; t += gridDim.x) {
    const std::int64_t row0 = static_cast<std::int64_t>(t) * p.hidden;
    float squares = 0.f;
    for (int i = threadIdx.x * kVector; i < p.hidden; i += blockDim.x * kVector) {
      float acc[kVector] = {};
      for (int m = 0; m < team.size; ++m) {
        const Pack<T> v = load_pack(ctx.translate(x + row0 + i, team.world_rank(m), kVector));
#pragma unroll
        for (int e = 0; e < kVector; ++e) acc[e] += Element<T>::load(v.e[e]);
      }
      const Pack<T> res = load_pack(residual + row0 + i);
      Pack<T> out;
#pragma unroll
      for (int e = 0; e < kVector; ++e) {
        out.e[e] = Element<T>::store(acc[e] + Element<T>::load(res.e[e]));
        const float rounded = Element<T>::load(out.e[e]);
        squares += rounded * rounded;
      }
      store_pack(residual_out + row0 + i, out);
    }
    const float sum_of_squares = block_sum(squares);
    if (t + static_cast<int>(gridDim.x) >= p.tokens)  // the last row: no more peer reads
      done = iris::device::arrive(block, ctx, bars, channel);
    normalize_row<T, kFp8>(p, row0, sum_of_squares);
  }
  iris::device::wait(block, ctx, bars, done);
}

/// The norm of the bulk-synchronous pattern: residual_out = residual + sum, then the same
/// second pass. One block per row (grid-stride); nothing to wait for.
template <class T, bool kFp8>
__global__ void __launch_bounds__(kNormThreads, 2) residual_rmsnorm(NormParams p) {
  const T* sum = static_cast<const T*>(p.sum);
  const T* residual = static_cast<const T*>(p.residual);
  T* residual_out = static_cast<T*>(p.residual_out);
  for (int t = blockIdx.x; t < p.tokens; t += gridDim.x) {
    const std::int64_t row0 = static_cast<std::int64_t>(t) * p.hidden;
    float squares = 0.f;
    for (int i = threadIdx.x * kVector; i < p.hidden; i += blockDim.x * kVector) {
      const Pack<T> s = load_pack(sum + row0 + i), res = load_pack(residual + row0 + i);
      Pack<T> out;
#pragma unroll
      for (int e = 0; e < kVector; ++e) {
        out.e[e] = Element<T>::store(Element<T>::load(s.e[e]) + Element<T>::load(res.e[e]));
        const float rounded = Element<T>::load(out.e[e]);
        squares += rounded * rounded;
      }
      store_pack(residual_out + row0 + i, out);
    }
    normalize_row<T, kFp8>(p, row0, block_sum(squares));
  }
}

struct AllReduceRmsNormState {
  Context* ctx = nullptr;
  AllReduceRmsNormArguments args{};
  iris::team team{};
  AllReduceNormPattern pattern = AllReduceNormPattern::kAuto;
  std::optional<iris::ccl::Communicator> comm;
  Barriers bars;
  void* sum = nullptr;  // bulk-synchronous: symmetric, tokens x hidden
  std::size_t sum_bytes = 0;
  int blocks = 0;
  int norm_blocks = 0;

  void release_sum() {
    if (sum != nullptr) ctx->free_bytes(sum);  // collective, like the allocation
    sum = nullptr;
    sum_bytes = 0;
  }
  // Destruction is collective (the frees are): the device's work, this op's kernels included,
  // is waited for first, so no kernel of this rank still uses the memory. Peers write into this
  // rank's barrier channels only before this rank's last wait returns.
  ~AllReduceRmsNormState() {
    if (comm) cudaDeviceSynchronize();
    if (sum != nullptr) {
      try {
        release_sum();
      } catch (...) {
        // a destructor must not throw; the heap reports the leak at teardown
      }
    }
  }
};

namespace {

bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

/// Whether [a, a + a_bytes) and [b, b + b_bytes) overlap.
bool overlap(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  const auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

}  // namespace

}  // namespace detail

AllReduceRmsNorm::AllReduceRmsNorm(Context& ctx)
    : state_(std::make_unique<detail::AllReduceRmsNormState>()) {
  state_->ctx = &ctx;
}
AllReduceRmsNorm::~AllReduceRmsNorm() = default;
AllReduceRmsNorm::AllReduceRmsNorm(AllReduceRmsNorm&&) noexcept = default;
AllReduceRmsNorm& AllReduceRmsNorm::operator=(AllReduceRmsNorm&&) noexcept = default;

Status AllReduceRmsNorm::can_implement(const AllReduceRmsNormArguments& args) {
  if (args.type != DType::kBF16 && args.type != DType::kF16)
    return Status::failure("the element type is " + std::string(to_string(args.type)) +
                           "; AllReduceRmsNorm takes bf16 or fp16");
  if (args.tokens < 1)
    return Status::failure("tokens = " + std::to_string(args.tokens) + " must be at least 1");
  if (args.hidden < detail::kVector || args.hidden % detail::kVector != 0)
    return Status::failure("hidden = " + std::to_string(args.hidden) +
                           " must be a positive multiple of 8 (16 bytes of " +
                           std::string(to_string(args.type)) + ": rows are read in 16-byte words)");
  if (!(args.eps > 0.f) || !std::isfinite(args.eps))
    return Status::failure("eps = " + std::to_string(args.eps) + " must be positive and finite");
  if (args.y_type != NormOutput::kInput && args.y_type != NormOutput::kFp8E4M3)
    return Status::failure("y_type is not a NormOutput (input or fp8_e4m3)");
  if (args.y_type == NormOutput::kFp8E4M3 &&
      (!(args.y_scale > 0.f) || !std::isfinite(args.y_scale)))
    return Status::failure(
        "y_scale = " + std::to_string(args.y_scale) +
        " must be positive and finite (the fp8 output is norm * gamma / y_scale)");
  if (args.y_type == NormOutput::kInput && args.y_scale != 1.f)
    return Status::failure("y_scale = " + std::to_string(args.y_scale) +
                           " applies only to the fp8 output (y_type = fp8_e4m3); with y in " +
                           std::string(to_string(args.type)) + " it must stay 1");
  if (args.max_blocks < 0)
    return Status::failure("max_blocks = " + std::to_string(args.max_blocks) +
                           " must be 0 (the default) or positive");
  const struct {
    const void* p;
    const char* name;
  } tensors[] = {{args.x, "x"},
                 {args.residual, "residual"},
                 {args.gamma, "gamma"},
                 {args.residual_out, "residual_out"},
                 {args.y, "y"}};
  for (const auto& t : tensors) {
    if (t.p == nullptr) return Status::failure(std::string(t.name) + " is null");
    if (!detail::aligned16(t.p))
      return Status::failure(std::string(t.name) + " must be 16-byte aligned");
  }
  const std::size_t bytes = std::size_t(args.tokens) * args.hidden * size_of(args.type);
  if (args.residual_out != args.residual &&
      detail::overlap(args.residual_out, bytes, args.residual, bytes))
    return Status::failure("residual_out must be residual itself (in place) or not overlap it");
  const std::size_t y_bytes =
      args.y_type == NormOutput::kFp8E4M3 ? std::size_t(args.tokens) * args.hidden : bytes;
  for (int i = 0; i < 4; ++i) {  // every tensor but y itself (tensors[4])
    const std::size_t span = i == 2 ? args.hidden * size_of(args.type) : bytes;  // 2: gamma
    if (detail::overlap(args.y, y_bytes, tensors[i].p, span))
      return Status::failure(std::string("y must not overlap ") + tensors[i].name);
  }
  return Status::success();
}

Status AllReduceRmsNorm::can_implement(const Context& ctx, const AllReduceRmsNormArguments& args) {
  if (auto status = can_implement(args); !status) return status;
  int me = -1;
  if (auto status = detail::check_membership(ctx, detail::resolve_team(ctx, args.team), me);
      !status)
    return status;
  const std::size_t bytes = std::size_t(args.tokens) * args.hidden * size_of(args.type);
  if (!ctx.contains(args.x) || !ctx.contains(static_cast<const char*>(args.x) + bytes - 1))
    return Status::failure(
        "x must be a symmetric buffer of tokens x hidden = " + std::to_string(args.tokens) + " x " +
        std::to_string(args.hidden) + " elements inside the Context's heap (peers read it)");
  return Status::success();
}

std::size_t AllReduceRmsNorm::workspace_size(const AllReduceRmsNormArguments&) {
  return 0;
}

void AllReduceRmsNorm::initialize(const AllReduceRmsNormArguments& args, void*, cudaStream_t) {
  auto& s = *state_;
  Context& ctx = *s.ctx;
  if (auto status = can_implement(ctx, args); !status)
    throw Error(Errc::kInvalidArgument, "iris::ops::AllReduceRmsNorm: " + status.message);
  const iris::team team = detail::resolve_team(ctx, args.team);
  if (!s.comm || s.team != team) {
    s.comm.reset();  // collective destruction, then collective construction
    s.bars = {};
    s.comm.emplace(ctx, team);
    s.bars = ctx.make_barriers(team, detail::kNormChannels);
  }
  s.args = args;
  s.team = team;
  // Until a table measured on the machine says otherwise: the fused kernel, which moves each
  // element once, launches once and rounds once.
  s.pattern =
      args.pattern == AllReduceNormPattern::kAuto ? AllReduceNormPattern::kFused : args.pattern;
  const int budget = args.max_blocks > 0 ? args.max_blocks : s.comm->max_blocks();
  s.blocks = std::max(1, std::min({args.tokens, budget, detail::kNormChannels}));
  s.norm_blocks = std::max(1, std::min(args.tokens, 2 * detail::device_sms()));
  const std::size_t bytes = std::size_t(args.tokens) * args.hidden * size_of(args.type);
  const std::size_t want = s.pattern == AllReduceNormPattern::kBulkSynchronous ? bytes : 0;
  if (s.sum_bytes != want) {
    s.release_sum();
    if (want > 0) {
      s.sum = ctx.allocate_bytes(want);
      s.sum_bytes = want;
    }
  }
}

void AllReduceRmsNorm::run(cudaStream_t stream) {
  auto& s = *state_;
  if (!s.comm)
    throw Error(Errc::kInvalidArgument, "iris::ops::AllReduceRmsNorm::run before initialize");
  const auto& a = s.args;
  detail::NormParams p;
  p.tokens = a.tokens;
  p.hidden = a.hidden;
  p.eps = a.eps;
  p.y_scale = a.y_scale;
  p.x = a.x;
  p.sum = s.sum;
  p.residual = a.residual;
  p.gamma = a.gamma;
  p.residual_out = a.residual_out;
  p.y = a.y;
  const bool bf16 = a.type == DType::kBF16;
  const bool fp8 = a.y_type == NormOutput::kFp8E4M3;
  if (s.pattern == AllReduceNormPattern::kFused) {
    const iris::device::Context dctx = s.ctx->device();
    const iris::device::Barriers bars = s.bars.device();
    auto* kernel = bf16 ? (fp8 ? detail::allreduce_rmsnorm_fused<__nv_bfloat16, true>
                               : detail::allreduce_rmsnorm_fused<__nv_bfloat16, false>)
                        : (fp8 ? detail::allreduce_rmsnorm_fused<__half, true>
                               : detail::allreduce_rmsnorm_fused<__half, false>);
    kernel<<<s.blocks, detail::kNormThreads, 0, stream>>>(dctx, bars, s.team, p);
  } else {
    const std::size_t count = std::size_t(a.tokens) * a.hidden;
    s.comm->all_reduce(s.sum, a.x, count,
                       bf16 ? iris::ccl::DataType::kBFloat16 : iris::ccl::DataType::kFloat16,
                       iris::ccl::ReduceOp::kSum, stream);
    auto* kernel = bf16 ? (fp8 ? detail::residual_rmsnorm<__nv_bfloat16, true>
                               : detail::residual_rmsnorm<__nv_bfloat16, false>)
                        : (fp8 ? detail::residual_rmsnorm<__half, true>
                               : detail::residual_rmsnorm<__half, false>);
    kernel<<<s.norm_blocks, detail::kNormThreads, 0, stream>>>(p);
  }
  IRIS_CUDA_CHECK(cudaGetLastError());
}

AllReduceNormPattern AllReduceRmsNorm::pattern() const {
  return state_->pattern;
}
int AllReduceRmsNorm::blocks() const {
  return state_->blocks;
}

}  // namespace iris::ops
