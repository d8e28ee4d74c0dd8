// iris::ops::Tracer: per-tile device events of the fused ops, for a timeline of how computation
// and communication overlap.
//
//   iris::ops::Tracer tracer;                     // device buffer for this rank's events
//   args.trace = &tracer;                         // GemmAllScatterArguments: tracing on
//   op.initialize(args); op.run(stream);
//   tracer.write_json(ctx, "trace.json");         // collective: one Chrome/Perfetto JSON
//   // python3 scripts/plot_trace.py trace.json trace.png
//
// Kernels record with the GPU's global timer (nanoseconds; one clock for every SM of a GPU).
// Off (args.trace == nullptr, the default) the kernels test one null pointer per tile and record
// nothing. On, each recording thread does one atomicAdd and one 32-byte store per event; events
// past the capacity are counted but dropped (dropped() says how many).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace iris {
class Context;
}

namespace iris::ops {

enum class TraceKind : std::uint32_t {
  kGemmTile,  ///< a CTA computing one tile (from its previous tile's end to this epilogue)
  kStore,     ///< the epilogue staging and storing a tile to its receivers
  kSignal,    ///< a tile's flags raised (start = end)
  kWait,      ///< the communication kernel waiting for a tile's local flag
  kPush,      ///< the communication kernel (or all-gather) sending one tile to its peers
};

std::string_view to_string(TraceKind kind) noexcept;

/// One event as the device records it.
struct TraceEvent {
  std::uint64_t start_ns;
  std::uint64_t end_ns;
  TraceKind kind;
  std::int32_t rank;  ///< world rank that recorded it
  std::int32_t tile;  ///< tile index within the sender's block of C (row-major over tiles)
  std::uint32_t sm;   ///< SM that recorded it
};
static_assert(sizeof(TraceEvent) == 32, "TraceEvent is 32 bytes on host and device");

namespace detail {
/// What kernels receive (plain data); events == nullptr means tracing is off.
struct TraceBuffer {
  TraceEvent* events = nullptr;
  unsigned* count = nullptr;
  unsigned capacity = 0;
};
}  // namespace detail

class Tracer {
 public:
  /// Device memory for `capacity` events of this rank (ordinary device memory; not collective).
  explicit Tracer(std::size_t capacity = std::size_t{1} << 18);
  ~Tracer();
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  detail::TraceBuffer device() const { return buffer_; }
  /// Forgets the recorded events (stream-ordered).
  void clear(cudaStream_t stream = nullptr);
  /// This rank's events, in recording order (waits for the device).
  std::vector<TraceEvent> events() const;
  /// Events recorded past the capacity (waits for the device).
  std::size_t dropped() const;
  /// Collective over ctx's world: every rank's events go to rank 0, which writes one Chrome
  /// trace-event JSON (loadable by ui.perfetto.dev and chrome://tracing) to `path`: one process
  /// per rank, one thread per SM, times in microseconds from the earliest event.
  void write_json(Context& ctx, const std::string& path) const;

 private:
  detail::TraceBuffer buffer_;
};

}  // namespace iris::ops
