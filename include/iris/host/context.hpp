// iris::Context: one rank's view of the job — its rank, its GPU, and the symmetric heap that
// every rank can reach.
//
//   auto ctx = iris::Context::from_env();     // rendezvous, GPU choice, heap mapping
//   auto buf = ctx.zeros<float>(1 << 20);     // the same offset on every rank
//   kernel<<<grid, block>>>(ctx.device(), buf.data(), buf.size());
//   ctx.barrier();
//
// Creation, destruction, every allocation and every free are collective: all ranks make them,
// in the same order. Several contexts may exist in one process (each with its own heap); none is
// global.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <type_traits>

#include "iris/device/barrier.hpp"
#include "iris/device/context.hpp"
#include "iris/device/team.hpp"
#include "iris/host/bootstrap.hpp"
#include "iris/host/buffer.hpp"

namespace iris {

/// How peers' heaps are made reachable.
enum class HeapTransport {
  kAuto,  ///< VMM when the driver supports POSIX-fd export, else cudaIpc (logged)
  kVmm,   ///< cuMemCreate + fds over Unix sockets + one flat VA window (pointer math only)
  kIpc,   ///< cudaIpc handles; peers' heaps land at unrelated addresses (a table lookup)
};

struct ContextOptions {
  /// Heap bytes per rank; default IRIS_HEAP_SIZE, else 1 GiB. Rounded up to the VMM granularity.
  std::optional<std::size_t> heap_size;
  /// CUDA device ordinal; default IRIS_DEVICE, else local rank modulo the visible device count.
  std::optional<int> cuda_device;
  /// Default IRIS_HEAP_TRANSPORT, else kAuto.
  std::optional<HeapTransport> transport;
  /// Check that all ranks allocate alike; default IRIS_DEBUG_CHECKS, else off.
  std::optional<bool> debug_checks;
  /// How long a bounded device wait spins before it reports; default IRIS_WAIT_TIMEOUT, else 60 s.
  /// Zero waits forever.
  std::optional<std::chrono::nanoseconds> wait_timeout;
};

/// What the heap looks like from this rank.
struct HeapInfo {
  std::byte* base = nullptr;    ///< this rank's heap
  std::size_t size = 0;         ///< bytes per rank
  std::ptrdiff_t stride = 0;    ///< distance between ranks' heaps in the flat window (0: table)
  std::byte* window = nullptr;  ///< rank 0's heap: start of the flat window (null: table)
  HeapTransport transport = HeapTransport::kAuto;  ///< the one in use (never kAuto)
  std::size_t reserved = 0;  ///< bytes at the heap's start that Iris keeps for itself
  std::size_t in_use = 0;    ///< bytes allocated by the application
  std::size_t live_allocations = 0;
};

std::string to_string(HeapTransport transport);

/// A barrier object: `count()` independent barrier channels for the ranks of `team()`, made by
/// Context::make_barriers. Kernels take its device handle, device(), by value and name the
/// channel they use (iris/device/barrier.hpp: arrive, wait, sync, and the ordering guarantee).
/// Its memory is symmetric heap memory: destroy it on every rank, in the same order as other
/// frees, after the kernels that use it are done.
class Barriers {
 public:
  Barriers() = default;
  device::Barriers device() const { return handle_; }
  const iris::team& team() const { return handle_.team(); }
  int count() const { return handle_.channels(); }

 private:
  friend class Context;
  Barriers(Buffer<std::uint64_t> slots, device::Barriers handle)
      : slots_(std::move(slots)), handle_(handle) {}
  Buffer<std::uint64_t> slots_;
  device::Barriers handle_;
};

class Context {
 public:
  /// Joins the job described by the environment (iris-run, torchrun, mpirun; a single rank when
  /// there is none) and maps the symmetric heap. Collective.
  static Context from_env(const ContextOptions& options = {});

  /// Joins the job through `bootstrap` (e.g. a FunctionBootstrap over an MPI communicator).
  /// Collective.
  explicit Context(std::unique_ptr<Bootstrap> bootstrap, const ContextOptions& options = {});

  Context(Context&&) noexcept;
  Context& operator=(Context&&) noexcept;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  /// Collective: waits for this rank's GPU work, then for every rank to arrive, so that no rank
  /// unmaps memory a peer is still using. Buffers may outlive the Context; their memory stays
  /// mapped until the last one is gone.
  ~Context();

  int rank() const;
  int world_size() const;
  /// Rank among the ranks on this host, and how many there are.
  int local_rank() const;
  int local_world_size() const;
  /// The CUDA device this rank uses (current on the creating thread after construction).
  int cuda_device() const;
  HeapInfo heap() const;
  /// True when `ptr` points into this rank's heap.
  bool contains(const void* ptr) const;
  Bootstrap& bootstrap() const;

  /// The handle kernels take (by value): rank, world size, heap window, wait timeout.
  device::Context device() const;

  /// Host barrier. Waits for all work this rank queued on its device, then for every rank to
  /// arrive. When it returns, every rank's GPU work issued before the call is complete and
  /// visible to all ranks. Throws the report of any device wait that timed out.
  void barrier();

  /// Device barrier on `stream`: a kernel that returns when every rank's kernel reached it.
  /// Stream-ordered and capturable in CUDA graphs; the host does not wait.
  void device_barrier(cudaStream_t stream = nullptr);

  /// `count` independent barrier channels for the ranks of `team` (the world by default), in
  /// zeroed symmetric memory. Collective over the world, like every allocation: every rank calls
  /// it, members of the team or not (others get a handle they must not use). Graph-capturable
  /// use, no reset: see iris/device/barrier.hpp. Throws iris::Error(kInvalidArgument) when the
  /// team does not fit in the world or count < 1.
  ///   iris::Barriers bars = ctx.make_barriers(iris::team{.start = 0, .size = 4, .stride = 2}, 8);
  Barriers make_barriers(const iris::team& team, int count,
                         std::source_location where = std::source_location::current());
  Barriers make_barriers(int count, std::source_location where = std::source_location::current()) {
    return make_barriers(iris::team::world(world_size()), count, where);
  }

  /// Throws iris::Error(kDeviceTimeout) with the report when a bounded device wait of this rank
  /// timed out (the kernel that timed out has trapped; the CUDA context is then unusable).
  void check_device_errors() const;

  // ---- Symmetric allocation (collective; same calls in the same order on every rank) ----
  // The filled forms (all but empty) write this rank's copy and then run barrier(), so peers may
  // write into the buffer as soon as the call returns. `where` names the caller in diagnostics.

  template <class T>
  Buffer<T> empty(Shape shape, std::source_location where = std::source_location::current());
  template <class T>
  Buffer<T> zeros(Shape shape, std::source_location where = std::source_location::current());
  template <class T>
  Buffer<T> ones(Shape shape, std::source_location where = std::source_location::current());
  template <class T>
  Buffer<T> full(Shape shape, T value,
                 std::source_location where = std::source_location::current());
  /// start, start + step, start + 2 * step, ... in row-major order.
  template <class T>
  Buffer<T> arange(Shape shape, T start = T(0), T step = T(1),
                   std::source_location where = std::source_location::current());
  /// Uniform in [low, high); element i depends only on (seed, i): reproducible across runs and
  /// ranks (mix the rank into the seed for per-rank data).
  template <class T>
  Buffer<T> uniform(Shape shape, T low, T high, std::uint64_t seed,
                    std::source_location where = std::source_location::current());
  /// Normal(mean, stddev); element i depends only on (seed, i).
  template <class T>
  Buffer<T> normal(Shape shape, T mean, T stddev, std::uint64_t seed,
                   std::source_location where = std::source_location::current());

  template <class T>
  Buffer<T> empty_like(const Buffer<T>& other,
                       std::source_location where = std::source_location::current()) {
    return empty<T>(other.shape(), where);
  }
  template <class T>
  Buffer<T> zeros_like(const Buffer<T>& other,
                       std::source_location where = std::source_location::current()) {
    return zeros<T>(other.shape(), where);
  }
  template <class T>
  Buffer<T> ones_like(const Buffer<T>& other,
                      std::source_location where = std::source_location::current()) {
    return ones<T>(other.shape(), where);
  }
  template <class T>
  Buffer<T> full_like(const Buffer<T>& other, T value,
                      std::source_location where = std::source_location::current()) {
    return full<T>(other.shape(), value, where);
  }

  /// Raw symmetric bytes (alignment: a power of two, at least 256). Collective. Release with
  /// free_bytes in the same order on every rank.
  void* allocate_bytes(std::size_t bytes, std::size_t alignment = 256,
                       std::source_location where = std::source_location::current());
  void free_bytes(void* ptr, std::source_location where = std::source_location::current());

 private:
  std::shared_ptr<detail::ContextState> state_;
};

}  // namespace iris

#include "iris/host/detail/context_impl.hpp"
