// iris::ops::Gemm: argument checks (host only) and the choice among the compiled kernels.
#include "iris/ops/gemm.hpp"

#include <cuda_runtime_api.h>

#include <string>

#include "iris/host/env.hpp"
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

std::string_view to_string(GemmConfig config) noexcept {
  switch (config) {
    case GemmConfig::kAuto:
      return "auto";
    case GemmConfig::kLargeTile:
      return "large_tile";
    case GemmConfig::kSmallM:
      return "small_m";
    case GemmConfig::kSwapAB:
      return "swap_ab";
  }
  return "?";
}

namespace detail {

namespace {

/// Whether the decode configurations (kSmallM, kSwapAB) are compiled for these types.
bool has_decode_kernels(DType ab, DType d) {
  return ab == DType::kBF16 && d == DType::kBF16;
}

bool is_decode_config(GemmConfig config) {
  return config == GemmConfig::kSmallM || config == GemmConfig::kSwapAB;
}

/// IRIS_GEMM_CONFIG, kAuto when unset.
GemmConfig config_from_env() {
  const auto value = iris::env::get(kGemmConfigEnv);
  if (!value) return GemmConfig::kAuto;
  for (const GemmConfig c :
       {GemmConfig::kAuto, GemmConfig::kLargeTile, GemmConfig::kSmallM, GemmConfig::kSwapAB})
    if (*value == to_string(c)) return c;
  throw Error(Errc::kInvalidArgument, std::string(kGemmConfigEnv) + "=\"" + *value +
                                          "\" is not a GEMM configuration (auto, large_tile, "
                                          "small_m or swap_ab)");
}

/// The SMs the GEMM may use: args.sm_count, else the current device's; 0 when there is none.
int usable_sms(const GemmArguments& g) {
  if (g.sm_count > 0) return g.sm_count;
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return sms;
}

std::int64_t tiles(std::int64_t extent, int tile) {
  return (extent + tile - 1) / tile;
}

}  // namespace

// The largest M the shape rule gives to the swap-AB kernel: two columns of its tiles (64 rows of
// A, the tokens). Up to 32 tokens one column holds them all and B is read once; at 33..64 B is
// read twice, the second time mostly from L2. Any value works; this is where the decode table
// (bench_gemm_all_scatter --decode, N 8192, K 3584 and 28672) had the swap ahead of the small-M
// kernel in every run, at M = 64 too, while at M = 128 neither led throughout.
constexpr int kSwapABMaxM = 2 * kSwapABShape.tile_n;

// The selection rule, the one place it lives (docs/ops.md, "GEMM configurations"). At decode
// (M = 1..64 tokens) the swap-AB kernel puts the tokens on the wgmma's narrow side, where the
// other kernels pad them to 128 rows, and splits K where its tiles are too few for the SMs. Above
// that, the large tile's persistent grid gives each SM at most one of its ceil(M / 128) * ceil(N /
// 256) tiles at a time, so with fewer tiles than SMs the rest idle; at N = 8192 and M <= 256 that
// is 32 or 64 tiles on 132 SMs. Where the large tile would leave at least half the SMs idle, the
// small-M kernel runs instead: 4x the tiles, and the stream-K scheduler splits K across the SMs
// when even those are too few. The swap asks nothing of the shape that the others do not (see
// can_implement's notes in docs/ops.md), so the only fallback is by type: only bf16 -> bf16 has the
// decode kernels.
GemmConfig select_config(const GemmArguments& g) {
  GemmConfig config = g.config != GemmConfig::kAuto ? g.config : config_from_env();
  const bool decode_kernels = has_decode_kernels(g.a_type, g.d_type);
  if (is_decode_config(config) && g.config == GemmConfig::kAuto && !decode_kernels)
    return GemmConfig::kLargeTile;  // IRIS_GEMM_CONFIG applies where the kernel exists
  if (config != GemmConfig::kAuto) return config;
  if (!decode_kernels || g.m <= 0 || g.n <= 0) return GemmConfig::kLargeTile;
  if (g.m <= kSwapABMaxM) return GemmConfig::kSwapAB;
  const int sms = usable_sms(g);
  const std::int64_t large_tiles =
      tiles(g.m, kLargeTileShape.tile_m) * tiles(g.n, kLargeTileShape.tile_n);
  return sms > 0 && 2 * large_tiles <= sms ? GemmConfig::kSmallM : GemmConfig::kLargeTile;
}

namespace {

/// The kernel of one configuration; null when none is compiled for the types.
std::unique_ptr<GemmRunner> make_config(GemmConfig config, DType ab, DType d) {
  if (is_decode_config(config) && !has_decode_kernels(ab, d)) return nullptr;
  if (config == GemmConfig::kSmallM) return make_small_m_gemm_bf16();
  if (config == GemmConfig::kSwapAB) return make_swap_ab_gemm_bf16();
  if (ab == DType::kBF16 && d == DType::kBF16) return make_gemm_bf16_bf16();
  if (ab == DType::kF16 && d == DType::kF16) return make_gemm_f16_f16();
  if (ab == DType::kBF16 && d == DType::kF32) return make_gemm_bf16_f32();
  return nullptr;
}

/// The plain GEMM of make_gemm: binds, at each initialize(), the kernel that select_config picks
/// for the arguments, and owns a workspace for it when the caller gives none.
class ShapeSelectedGemm final : public GemmRunner {
 public:
  ShapeSelectedGemm(DType ab, DType d) : ab_(ab), d_(d) {}
  ~ShapeSelectedGemm() override {
    if (owned_ != nullptr) (void)cudaFree(owned_);
  }
  ShapeSelectedGemm(const ShapeSelectedGemm&) = delete;
  ShapeSelectedGemm& operator=(const ShapeSelectedGemm&) = delete;

  Status can_implement(const GemmArguments& args) const override {
    const GemmConfig config = select_config(args);
    auto runner = make_config(config, ab_, d_);
    if (!runner)
      return Status::failure("the " + std::string(to_string(config)) +
                             " configuration is not compiled for " + std::string(to_string(ab_)) +
                             " -> " + std::string(to_string(d_)) +
                             " (small_m and swap_ab are bf16 -> bf16 only)");
    return runner->can_implement(args);
  }

  std::size_t workspace_size(const GemmArguments& args) const override {
    auto runner = make_config(select_config(args), ab_, d_);
    return runner ? runner->workspace_size(args) : 0;
  }

  void initialize(const GemmArguments& args, const TileStore* store, void* workspace,
                  cudaStream_t stream) override {
    const GemmConfig config = select_config(args);
    if (!bound_ || config != config_) {
      bound_ = make_config(config, ab_, d_);
      config_ = config;
      if (!bound_)
        throw Error(Errc::kInvalidArgument,
                    std::string("the ") + std::string(to_string(config)) +
                        " GEMM configuration is not compiled for these types");
    }
    const std::size_t bytes = bound_->workspace_size(args);
    if (workspace == nullptr && bytes > 0) {
      if (owned_bytes_ < bytes) {
        if (owned_ != nullptr) {
          IRIS_CUDA_CHECK(cudaFree(owned_));  // waits for kernels that may still use it
          owned_ = nullptr;
          owned_bytes_ = 0;
        }
        IRIS_CUDA_CHECK(cudaMalloc(&owned_, bytes));
        owned_bytes_ = bytes;
      }
      workspace = owned_;
    }
    bound_->initialize(args, store, workspace, stream);
  }

  void run(cudaStream_t stream) override {
    if (!bound_) throw Error(Errc::kInternal, "GEMM run before initialize");
    bound_->run(stream);
  }

  int tile_m() const override { return bound_ ? bound_->tile_m() : kLargeTileShape.tile_m; }
  int tile_n() const override { return bound_ ? bound_->tile_n() : kLargeTileShape.tile_n; }

 private:
  DType ab_, d_;
  std::unique_ptr<GemmRunner> bound_;
  GemmConfig config_ = GemmConfig::kAuto;
  void* owned_ = nullptr;
  std::size_t owned_bytes_ = 0;
};

}  // namespace

std::unique_ptr<GemmRunner> make_gemm(DType ab, DType d) {
  if (!make_config(GemmConfig::kLargeTile, ab, d)) return nullptr;
  return std::make_unique<ShapeSelectedGemm>(ab, d);
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
  try {
    return detail::make_gemm(args.a_type, args.d_type)->can_implement(args);
  } catch (const Error& e) {  // a bad IRIS_GEMM_CONFIG
    return Status::failure(e.message());
  }
}

std::size_t Gemm::workspace_size(const GemmArguments& args) {
  if (!detail::check_arguments(args)) return 0;
  return detail::make_gemm(args.a_type, args.d_type)->workspace_size(args);
}

GemmConfig Gemm::select_config(const GemmArguments& args) {
  return detail::select_config(args);
}

void Gemm::initialize(const GemmArguments& args, void* workspace, cudaStream_t stream) {
  if (auto status = can_implement(args); !status)
    throw Error(Errc::kInvalidArgument, "iris::ops::Gemm: " + status.message);
  GemmArguments bound = args;
  bound.config = detail::select_config(args);  // once: the environment is read here alone
  auto runner = detail::make_gemm(args.a_type, args.d_type);
  runner->initialize(bound, nullptr, workspace, stream);
  runner_ = std::move(runner);
  args_ = bound;
}

void Gemm::run(cudaStream_t stream) {
  if (!runner_) throw Error(Errc::kInvalidArgument, "iris::ops::Gemm::run before initialize");
  runner_->run(stream);
}

const GemmArguments& Gemm::arguments() const {
  return args_;
}

}  // namespace iris::ops
