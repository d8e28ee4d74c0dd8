// The shard-waiting GEMM's type-erased face: one persistent CUTLASS launch of C = A * B^T whose
// A is made of row shards that arrive while it runs. Before the producer warp loads a tile's A
// and B, a mainloop hook (waiting_mainloop.hpp) waits until the flag of every shard that holds
// the tile's rows has reached this run's epoch; tiles are visited from the shard `first_shard`
// on, in the order the shards arrive. Not public; needs no CUTLASS (the kernel is in
// waiting_mainloop.hpp, compiled in src/ops/gemm_shard_wait_bf16.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "iris/device/context.hpp"
#include "iris/ops/gemm.hpp"

namespace iris::ops::detail {

/// What the mainloop hook waits for. Shard q holds rows [q * rows, (q + 1) * rows) of A
/// (M = rows * shards; rows need not be a multiple of the tile's, so a tile may need several
/// shards); its flag is flags[q], a 64-bit counter in this rank's symmetric heap (the report
/// names it by heap offset). A tile may load
/// once flags[q] >= *epoch for every shard q its rows touch. *epoch is read once per CTA, when
/// the CTA's first tile is loaded: whatever writes it must precede the launch in stream order.
struct ShardWait {
  iris::device::Context ctx{};           ///< this rank's: the wait's timeout and report
  const std::uint64_t* flags = nullptr;  ///< one per shard, raised (not reset) run after run
  const std::uint64_t* epoch = nullptr;  ///< this run's number
  int rows = 0;                          ///< rows per shard (> 0)
  int shards = 0;
  /// Tiles are loaded from the first cluster of m blocks wholly inside this shard on, then the
  /// following ones in order, wrapping around: the order in which the shards arrive when this
  /// rank copies its own shard first and then pulls its peers' in the order first + 1, ...
  int first_shard = 0;
};

class ShardWaitGemm {
 public:
  virtual ~ShardWaitGemm() = default;
  /// CUTLASS's own check, after GemmArguments passed ours.
  virtual Status can_implement(const GemmArguments& args) const = 0;
  /// Binds the problem (args.sm_count as for iris::ops::Gemm) and the flags.
  virtual void initialize(const GemmArguments& args, const ShardWait& wait,
                          cudaStream_t stream) = 0;
  /// One launch on `stream`: stream-ordered, no allocation, graph-capturable. It returns only
  /// when every shard's flag has reached the epoch (or a wait times out and the kernel traps).
  virtual void run(cudaStream_t stream) = 0;
  virtual int tile_m() const = 0;
  virtual int tile_n() const = 0;
};

/// bf16 -> bf16 (src/ops/gemm_shard_wait_bf16.cu).
std::unique_ptr<ShardWaitGemm> make_shard_wait_gemm_bf16();

}  // namespace iris::ops::detail
