// iris::ops::Gemm: argument checks (host only) and the choice among the compiled kernels.
#include "iris/ops/gemm.hpp"

#include <string>

#include "iris/host/error.hpp"
#include "iris/ops/detail/gemm_runner.hpp"

namespace iris::ops {

std::string_view to_string(DType type) noexcept {
  switch (type) {
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "fp16";
    case DType::kF32:
      return "fp32";
  }
  return "?";
}

std::size_t size_of(DType type) noexcept {
  return type == DType::kF32 ? 4 : 2;
}

namespace detail {

std::unique_ptr<GemmRunner> make_gemm(DType ab, DType d) {
  if (ab == DType::kBF16 && d == DType::kBF16) return make_gemm_bf16_bf16();
  if (ab == DType::kF16 && d == DType::kF16) return make_gemm_f16_f16();
  if (ab == DType::kBF16 && d == DType::kF32) return make_gemm_bf16_f32();
  return nullptr;
}

namespace {
bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}
std::string str(std::int64_t v) {
  return std::to_string(v);
}
}  // namespace

Status check_arguments(const GemmArguments& g) {
  if (g.a_type != g.b_type)
    return Status::failure("A is " + std::string(to_string(g.a_type)) + " but B is " +
                           std::string(to_string(g.b_type)) + "; both operands must have one type");
  if (g.a_type == DType::kF32)
    return Status::failure("fp32 operands are not supported; A and B must be bf16 or fp16");
  const bool known =
      (g.a_type == DType::kBF16 && (g.d_type == DType::kBF16 || g.d_type == DType::kF32)) ||
      (g.a_type == DType::kF16 && g.d_type == DType::kF16);
  if (!known)
    return Status::failure(std::string(to_string(g.a_type)) + " -> " +
                           std::string(to_string(g.d_type)) +
                           " is not compiled; supported: bf16 -> bf16, fp16 -> fp16, bf16 -> fp32");
  if (g.m <= 0 || g.n <= 0 || g.k <= 0)
    return Status::failure("M, N and K must be positive (got M = " + str(g.m) +
                           ", N = " + str(g.n) + ", K = " + str(g.k) + ")");
  const std::int64_t in = static_cast<std::int64_t>(size_of(g.a_type));
  const std::int64_t out = static_cast<std::int64_t>(size_of(g.d_type));
  if ((g.k * in) % 16 != 0)
    return Status::failure(
        "K = " + str(g.k) + " gives rows of " + str(g.k * in) +
        " bytes; TMA needs rows of A and B to be a multiple of 16 bytes (K a multiple of " +
        str(16 / in) + ")");
  if ((g.n * out) % 16 != 0)
    return Status::failure("N = " + str(g.n) + " gives rows of D of " + str(g.n * out) +
                           " bytes; they must be a multiple of 16 bytes (N a multiple of " +
                           str(16 / out) + " for " + std::string(to_string(g.d_type)) + ")");
  const std::int64_t lda = g.lda ? g.lda : g.k, ldb = g.ldb ? g.ldb : g.k,
                     ldd = g.ldd ? g.ldd : g.n;
  if (lda < g.k || (lda * in) % 16 != 0)
    return Status::failure("lda = " + str(lda) + " must be >= K and a multiple of 16 bytes");
  if (ldb < g.k || (ldb * in) % 16 != 0)
    return Status::failure("ldb = " + str(ldb) + " must be >= K and a multiple of 16 bytes");
  if (ldd < g.n || (ldd * out) % 16 != 0)
    return Status::failure("ldd = " + str(ldd) + " must be >= N and a multiple of 16 bytes");
  if (g.a == nullptr || g.b == nullptr || g.d == nullptr)
    return Status::failure("A, B and D must be non-null device pointers");
  if (!aligned16(g.a) || !aligned16(g.b) || !aligned16(g.d))
    return Status::failure("A, B and D must be 16-byte aligned (TMA's rule)");
  if (g.sm_count < 0) return Status::failure("sm_count must be 0 (all SMs) or positive");
  return Status::success();
}

}  // namespace detail

Gemm::Gemm() = default;
Gemm::~Gemm() = default;
Gemm::Gemm(Gemm&&) noexcept = default;
Gemm& Gemm::operator=(Gemm&&) noexcept = default;

Status Gemm::can_implement(const GemmArguments& args) {
  if (auto status = detail::check_arguments(args); !status) return status;
  return detail::make_gemm(args.a_type, args.d_type)->can_implement(args);
}

std::size_t Gemm::workspace_size(const GemmArguments& args) {
  if (!detail::check_arguments(args)) return 0;
  return detail::make_gemm(args.a_type, args.d_type)->workspace_size(args);
}

void Gemm::initialize(const GemmArguments& args, void* workspace, cudaStream_t stream) {
  if (auto status = can_implement(args); !status)
    throw Error(Errc::kInvalidArgument, "iris::ops::Gemm: " + status.message);
  auto runner = detail::make_gemm(args.a_type, args.d_type);
  runner->initialize(args, nullptr, workspace, stream);
  runner_ = std::move(runner);
  args_ = args;
}

void Gemm::run(cudaStream_t stream) {
  if (!runner_) throw Error(Errc::kInvalidArgument, "iris::ops::Gemm::run before initialize");
  runner_->run(stream);
}

const GemmArguments& Gemm::arguments() const {
  return args_;
}

}  // namespace iris::ops
