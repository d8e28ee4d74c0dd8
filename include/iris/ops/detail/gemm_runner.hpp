// The type-erased face of one compiled GEMM kernel (one per translation unit under src/ops/).
// Not public. Needs no CUTLASS: the kernels themselves are in gemm_kernel.hpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "iris/device/context.hpp"
#include "iris/device/team.hpp"
#include "iris/ops/gemm.hpp"
#include "iris/ops/trace.hpp"

namespace iris::ops::detail {

/// Where the tile-store epilogue (tile_epilogue.hpp) sends each finished tile. Two routes, chosen
/// at run time (the kernel is the same):
///   owner_rows == 0 (all-scatter): to every member of `receivers`, at the tile's own place in D
///     (translated once per receiver), then 1 is added to each receiver's copy of the tile's flag,
///     flags[flag_offset + tile_m * tiles_n + tile_n], with release at system scope;
///   owner_rows > 0 (reduce-scatter): rows [q * owner_rows, (q + 1) * owner_rows) of D belong to
///     receiver q, and owner_rows is a multiple of the tile's rows, so a tile has one owner. The
///     tile goes only to its owner, at row (m0 - q * owner_rows) of D + slot_offset there (the
///     sender's slot of the owner's workspace), and raises the owner's flag
///     flags[flag_offset + local_tile_m * tiles_n + tile_n] (local_tile_m counted in the block).
struct TileStore {
  iris::device::Context ctx{};
  iris::team receivers{};
  std::uint64_t* flags = nullptr;  ///< symmetric, one counter per tile; null: no flags
  std::int64_t flag_offset = 0;
  /// Receivers are visited starting after this team index, so that ranks do not all write to
  /// the same peer at once (the sender's own index: it stores locally last).
  int first_receiver = 0;
  /// Per-tile events (gemm_tile, store, signal) when tracing is on.
  TraceBuffer trace{};
  /// The reduce-scatter route (see above); 0: every tile to every receiver.
  int owner_rows = 0;
  /// Elements from D to the sender's slot on the owner (reduce-scatter route only).
  std::int64_t slot_offset = 0;
};

class GemmRunner {
 public:
  virtual ~GemmRunner() = default;
  /// CUTLASS's own check, after GemmArguments passed ours; message empty when ok.
  virtual Status can_implement(const GemmArguments& args) const = 0;
  virtual std::size_t workspace_size(const GemmArguments& args) const = 0;
  /// `store` is required by tile-store kernels and ignored by the others. `workspace`: at least
  /// workspace_size(args) bytes of device memory, or null where that is 0 (the runner of
  /// make_gemm also takes null when it is not 0: it then allocates and owns one).
  virtual void initialize(const GemmArguments& args, const TileStore* store, void* workspace,
                          cudaStream_t stream) = 0;
  virtual void run(cudaStream_t stream) = 0;
  /// The CTA tile (BLK_M, BLK_N): the granularity of per-tile flags.
  virtual int tile_m() const = 0;
  virtual int tile_n() const = 0;
};

/// Forces the plain GEMM's configuration for every op: auto, large_tile, small_m or swap_ab
/// (docs/ops.md).
inline constexpr const char* kGemmConfigEnv = "IRIS_GEMM_CONFIG";

/// The CTA tile and cluster of a plain-GEMM configuration, for the selection rule (which needs
/// no CUTLASS); gemm_kernel.hpp checks them against the kernels.
struct GemmConfigShape {
  int tile_m, tile_n, cluster_m, cluster_n;
};
inline constexpr GemmConfigShape kLargeTileShape{128, 256, 2, 1};
inline constexpr GemmConfigShape kSmallMShape{128, 64, 1, 2};
/// In the swapped problem's terms (M' = N, N' = M): 128 rows of B by 32 rows of A.
inline constexpr GemmConfigShape kSwapABShape{128, 32, 1, 1};

// One factory per compiled kernel (src/ops/gemm_*.cu).
std::unique_ptr<GemmRunner> make_gemm_bf16_bf16();
std::unique_ptr<GemmRunner> make_gemm_f16_f16();
std::unique_ptr<GemmRunner> make_gemm_bf16_f32();
/// bf16 -> bf16 and fp16 -> fp16 with the tile-store epilogue (GEMM + all-scatter,
/// GEMM + reduce-scatter, GEMM + all-reduce).
std::unique_ptr<GemmRunner> make_tile_store_gemm_bf16();
std::unique_ptr<GemmRunner> make_tile_store_gemm_f16();

/// bf16 -> bf16, the small-M configuration (SmallMGemm: 128 x 64 tile, stream-K scheduler).
std::unique_ptr<GemmRunner> make_small_m_gemm_bf16();
/// bf16 -> bf16, the swap-AB configuration (SwapABGemm: D^T = B * A^T, 128 x 32 tile, stream-K).
std::unique_ptr<GemmRunner> make_swap_ab_gemm_bf16();

/// The plain GEMM for these types, or null when none is compiled. Every op's plain GEMM comes
/// from here: the runner picks the configuration (select_config) at each initialize() from the
/// arguments, and owns the workspace it needs when given none. tile_m()/tile_n() are the bound
/// kernel's; before the first initialize(), the large tile's.
std::unique_ptr<GemmRunner> make_gemm(DType ab, DType d);

/// The configuration the plain GEMM runs `args` with (GemmArguments::config, else
/// IRIS_GEMM_CONFIG, else the shape rule; see gemm.cpp). Never kAuto. Throws
/// iris::Error(kInvalidArgument) on a bad IRIS_GEMM_CONFIG.
GemmConfig select_config(const GemmArguments& args);

/// Our own checks of `args` (shape, types, alignment), as a sentence.
Status check_arguments(const GemmArguments& args);

}  // namespace iris::ops::detail
