// iris::ops::Tracer: device buffer management and the merged Chrome/Perfetto JSON.
#include "iris/ops/trace.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>

#include "iris/host/context.hpp"
#include "iris/host/error.hpp"

namespace iris::ops {

std::string_view to_string(TraceKind kind) noexcept {
  switch (kind) {
    case TraceKind::kGemmTile:
      return "gemm_tile";
    case TraceKind::kStore:
      return "store";
    case TraceKind::kSignal:
      return "signal";
    case TraceKind::kWait:
      return "wait";
    case TraceKind::kPush:
      return "push";
  }
  return "?";
}

Tracer::Tracer(std::size_t capacity) {
  if (capacity == 0 || capacity > std::numeric_limits<unsigned>::max() / 2)
    throw Error(Errc::kInvalidArgument, "Tracer capacity must be between 1 and 2^31 events");
  buffer_.capacity = static_cast<unsigned>(capacity);
  IRIS_CUDA_CHECK(
      cudaMalloc(reinterpret_cast<void**>(&buffer_.events), sizeof(TraceEvent) * capacity));
  IRIS_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&buffer_.count), sizeof(unsigned)));
  IRIS_CUDA_CHECK(cudaMemset(buffer_.count, 0, sizeof(unsigned)));
}

Tracer::~Tracer() {
  cudaFree(buffer_.events);
  cudaFree(buffer_.count);
}

void Tracer::clear(cudaStream_t stream) {
  IRIS_CUDA_CHECK(cudaMemsetAsync(buffer_.count, 0, sizeof(unsigned), stream));
}

namespace {
unsigned recorded(const detail::TraceBuffer& buffer) {
  IRIS_CUDA_CHECK(cudaDeviceSynchronize());
  unsigned count = 0;
  IRIS_CUDA_CHECK(cudaMemcpy(&count, buffer.count, sizeof(count), cudaMemcpyDeviceToHost));
  return count;
}
}  // namespace

std::vector<TraceEvent> Tracer::events() const {
  const unsigned count = std::min(recorded(buffer_), buffer_.capacity);
  std::vector<TraceEvent> events(count);
  if (count)
    IRIS_CUDA_CHECK(cudaMemcpy(events.data(), buffer_.events, sizeof(TraceEvent) * count,
                               cudaMemcpyDeviceToHost));
  return events;
}

std::size_t Tracer::dropped() const {
  const unsigned count = recorded(buffer_);
  return count > buffer_.capacity ? count - buffer_.capacity : 0;
}

void Tracer::write_json(Context& ctx, const std::string& path) const {
  const std::vector<TraceEvent> mine = events();
  // Gather counts, then events padded to the largest count.
  const int world = ctx.world_size();
  std::uint64_t count = mine.size();
  std::vector<std::uint64_t> counts(world);
  ctx.bootstrap().allgather(&count, counts.data(), sizeof(count));
  const std::uint64_t most = *std::max_element(counts.begin(), counts.end());
  std::vector<TraceEvent> padded(most), all(most * world);
  std::copy(mine.begin(), mine.end(), padded.begin());
  if (most) ctx.bootstrap().allgather(padded.data(), all.data(), sizeof(TraceEvent) * most);
  if (ctx.rank() != 0) return;
  std::uint64_t origin = std::numeric_limits<std::uint64_t>::max();
  for (int r = 0; r < world; ++r)
    for (std::uint64_t i = 0; i < counts[r]; ++i)
      origin = std::min(origin, all[r * most + i].start_ns);
  std::ofstream out(path);
  if (!out) throw Error(Errc::kSystem, "cannot write the trace to " + path);
  out << "{\"traceEvents\": [\n";
  bool first = true;
  char line[256];
  for (int r = 0; r < world; ++r) {
    std::snprintf(line, sizeof(line),
                  "%s{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"name\": "
                  "\"rank %d\"}}",
                  first ? "" : ",\n", r, r);
    out << line;
    first = false;
    for (std::uint64_t i = 0; i < counts[r]; ++i) {
      const TraceEvent& e = all[r * most + i];
      const double ts = static_cast<double>(e.start_ns - origin) / 1e3;
      const double dur = static_cast<double>(e.end_ns - e.start_ns) / 1e3;
      std::snprintf(
          line, sizeof(line),
          ",\n{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"ts\": %.3f, \"dur\": %.3f, "
          "\"pid\": %d, \"tid\": %u, \"args\": {\"tile\": %d}}",
          std::string(to_string(e.kind)).c_str(), std::string(to_string(e.kind)).c_str(), ts, dur,
          e.rank, e.sm, e.tile);
      out << line;
    }
  }
  out << "\n], \"displayTimeUnit\": \"ns\"}\n";
}

}  // namespace iris::ops
