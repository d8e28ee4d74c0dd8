#include "iris/host/context.hpp"

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "detail/context_state.hpp"
#include "detail/fill.hpp"
#include "detail/format.hpp"
#include "detail/log.hpp"
#include "detail/mailbox_format.hpp"
#include "iris/device/detail/barrier_state.hpp"
#include "iris/device/detail/config.hpp"
#include "iris/host/env.hpp"
#include "iris/host/error.hpp"

namespace iris {

std::string to_string(HeapTransport transport) {
  switch (transport) {
    case HeapTransport::kAuto:
      return "auto";
    case HeapTransport::kVmm:
      return "vmm";
    case HeapTransport::kIpc:
      return "ipc";
  }
  return "unknown";
}

namespace detail {
namespace {

constexpr std::size_t kDefaultHeapBytes = std::size_t{1} << 30;
constexpr auto kDefaultWaitTimeout = std::chrono::seconds(60);
constexpr auto kDefaultBootstrapTimeout = std::chrono::seconds(120);

HeapTransport transport_from_env() {
  const auto value = env::get(env::kHeapTransport);
  if (!value || *value == "auto") return HeapTransport::kAuto;
  if (*value == "vmm") return HeapTransport::kVmm;
  if (*value == "ipc") return HeapTransport::kIpc;
  throw Error(Errc::kInvalidArgument,
              std::string(env::kHeapTransport) + "='" + *value + "' is not one of auto, vmm, ipc");
}

int choose_device(const ContextOptions& options, const Topology& topology) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    throw Error(Errc::kNoDevice,
                "rank " + std::to_string(topology.rank) + " sees no CUDA device" +
                    (status != cudaSuccess ? std::string(" (") + cudaGetErrorString(status) + ")"
                                           : std::string()),
                static_cast<int>(status));
  }
  const long long device = options.cuda_device
                               ? *options.cuda_device
                               : env::get_int(env::kDevice, topology.local_rank % count);
  if (device < 0 || device >= count) {
    throw Error(Errc::kInvalidArgument, "CUDA device " + std::to_string(device) + " for rank " +
                                            std::to_string(topology.rank) + " does not exist (" +
                                            std::to_string(count) + " visible)");
  }
  return static_cast<int>(device);
}

/// Collective: throws iris::Error(kMismatch) on every rank when ranks disagree on `setting`,
/// which they must share because it changes which collectives they make.
void require_same_on_all_ranks(Bootstrap& bootstrap, bool setting, const char* what) {
  const std::uint8_t mine = setting ? 1 : 0;
  std::vector<std::uint8_t> all(bootstrap.world_size());
  bootstrap.allgather(&mine, all.data(), 1);
  for (int r = 0; r < bootstrap.world_size(); ++r) {
    if (all[r] != mine) {
      throw Error(Errc::kMismatch, std::string("ranks disagree on ") + what + ": rank " +
                                       std::to_string(bootstrap.rank()) + " has it " +
                                       (mine ? "on" : "off") + ", rank " + std::to_string(r) +
                                       (all[r] ? " on" : " off"));
    }
  }
}

}  // namespace

ContextState::ContextState(std::unique_ptr<Bootstrap> bootstrap_in, const ContextOptions& options)
    : bootstrap(std::move(bootstrap_in)) {
  if (!bootstrap) throw Error(Errc::kInvalidArgument, "Context needs a bootstrap, got null");
  // Every setting is read and checked before the first CUDA call, so that a bad value is
  // reported as such and not hidden behind "no CUDA device".
  env::check_environment();
  debug_checks =
      options.debug_checks ? *options.debug_checks : env::get_flag(env::kDebugChecks, false);
  const auto timeout = options.wait_timeout
                           ? *options.wait_timeout
                           : env::get_seconds(env::kWaitTimeout, kDefaultWaitTimeout);
  wait_timeout_ns = static_cast<std::uint64_t>(timeout.count());
  const std::size_t heap_bytes =
      options.heap_size ? *options.heap_size : env::get_size(env::kHeapSize, kDefaultHeapBytes);
  if (heap_bytes <= device::detail::kReservedHeapBytes) {
    throw Error(Errc::kInvalidArgument, "heap size " + format_byte_count(heap_bytes) +
                                            " leaves no room: Iris keeps the first " +
                                            format_bytes(device::detail::kReservedHeapBytes) +
                                            " of each heap for itself");
  }
  const HeapTransport transport = options.transport ? *options.transport : transport_from_env();
  const auto bootstrap_timeout = env::get_seconds(env::kBootstrapTimeout, kDefaultBootstrapTimeout);

  topology = discover_topology(*bootstrap);
  cuda_device = choose_device(options, topology);
  make_current();
  IRIS_CUDA_CHECK(cudaFree(nullptr));  // create the CUDA context now, not inside a later call
  require_same_on_all_ranks(*bootstrap, debug_checks, "debug checks (IRIS_DEBUG_CHECKS)");

  IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  IRIS_CUDA_CHECK(
      cudaHostAlloc(reinterpret_cast<void**>(&mailbox), sizeof(*mailbox), cudaHostAllocMapped));
  std::memset(static_cast<void*>(mailbox), 0, sizeof(*mailbox));
  IRIS_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&mailbox_device), mailbox, 0));

  heap = std::make_unique<SymmetricHeap>(*bootstrap, topology, cuda_device, heap_bytes, transport,
                                         bootstrap_timeout);
  allocator = std::make_unique<HeapAllocator>(device::detail::kReservedHeapBytes, heap->size());
  // Every rank makes the same first allocation, so it lands at the same offset everywhere.
  const std::size_t block_barrier_bytes = sizeof(std::uint64_t) *
                                          device::detail::kBarrierMaxBlocks *
                                          device::detail::channel_slots(topology.world_size);
  block_barriers_offset = allocator->allocate(block_barrier_bytes);
  block_barriers_bytes = allocator->bytes_in_use();
  if (debug_checks) check = std::make_unique<AllocationCheck>(*bootstrap);

  // Iris's own state (barrier epochs, flags) starts at zero on every rank before anyone uses it.
  IRIS_CUDA_CHECK(cudaMemsetAsync(heap->base(), 0, device::detail::kReservedHeapBytes, stream));
  IRIS_CUDA_CHECK(
      cudaMemsetAsync(heap->base() + block_barriers_offset, 0, block_barrier_bytes, stream));
  barrier();
  log(LogLevel::kInfo, "context ready: rank ", topology.rank, "/", topology.world_size, ", local ",
      topology.local_rank, "/", topology.local_world_size, ", GPU ", cuda_device, ", heap ",
      format_bytes(heap->size()), " via ", to_string(heap->transport()));
}

ContextState::~ContextState() {
  // Release in reverse order of creation; none of this may throw.
  cudaSetDevice(cuda_device);
  check.reset();
  allocator.reset();
  heap.reset();
  if (mailbox != nullptr) cudaFreeHost(mailbox);
  if (stream != nullptr) cudaStreamDestroy(stream);
}

void ContextState::make_current() const {
  IRIS_CUDA_CHECK(cudaSetDevice(cuda_device));
}

void ContextState::throw_if_device_reported() const {
  if (mailbox == nullptr) return;
  if (auto report = mailbox_report(*mailbox)) {
    throw Error(mailbox_is_timeout(*mailbox) ? Errc::kDeviceTimeout : Errc::kInvalidArgument,
                *report);
  }
}

void ContextState::synchronize_device() const {
  make_current();
  const cudaError_t status = cudaDeviceSynchronize();
  // A kernel whose bounded wait timed out left its report and trapped: the report is the cause.
  throw_if_device_reported();
  IRIS_CUDA_CHECK(status);
}

void ContextState::barrier() {
  synchronize_device();
  bootstrap->barrier();
}

void* allocate_symmetric(ContextState& state, Shape shape, std::size_t element_bytes,
                         const FillRequest& fill, std::source_location where) {
  if (shape.row_stride < shape.cols) {
    throw Error(Errc::kInvalidArgument,
                "shape " + std::to_string(shape.rows) + " x " + std::to_string(shape.cols) +
                    " has row stride " + std::to_string(shape.row_stride) + " < cols",
                0, where);
  }
  const std::size_t span = shape.span();
  if (shape.rows != 0 && (span / shape.rows != shape.row_stride ||
                          span > std::numeric_limits<std::size_t>::max() / element_bytes)) {
    throw Error(Errc::kInvalidArgument,
                "shape " + std::to_string(shape.rows) + " x " + std::to_string(shape.row_stride) +
                    " overflows a byte count",
                0, where);
  }
  state.make_current();
  const std::size_t offset =
      checked_allocate(*state.allocator, state.check.get(), span * element_bytes,
                       HeapAllocator::kGranularity, where);
  std::byte* data = state.heap->base() + offset;
  if (fill.kind != FillKind::kNone) {
    try {
      launch_fill(data, shape, fill, state.stream);
      // Peers may write into the buffer once this returns: finish the fill everywhere first.
      state.barrier();
    } catch (...) {
      state.allocator->free(offset);
      throw;
    }
  }
  return data;
}

void release_symmetric(ContextState& state, std::size_t offset) noexcept {
  try {
    checked_free(*state.allocator, state.check.get(), offset, std::source_location::current());
  } catch (const std::exception& error) {
    log(LogLevel::kError, "freeing a symmetric buffer failed: ", error.what());
  }
}

// Like a tensor's .cpu(): the copy sees every kernel this rank queued before it, on any stream,
// and a kernel still in flight never races with an overwrite from the host.
void copy_to_host(ContextState& state, void* host, const void* device, std::size_t bytes) {
  state.synchronize_device();
  IRIS_CUDA_CHECK(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost));
}

void copy_from_host(ContextState& state, void* device, const void* host, std::size_t bytes) {
  state.synchronize_device();
  IRIS_CUDA_CHECK(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice));
  IRIS_CUDA_CHECK(cudaDeviceSynchronize());
}

std::byte* heap_base_of(const ContextState& state, int rank) {
  if (rank < 0 || rank >= state.topology.world_size) {
    throw Error(Errc::kInvalidArgument, "rank " + std::to_string(rank) + " is outside the job of " +
                                            std::to_string(state.topology.world_size) + " ranks");
  }
  return state.heap->base_of(rank);
}

std::size_t heap_offset_of(const ContextState& state, const void* ptr) {
  return static_cast<std::size_t>(static_cast<const std::byte*>(ptr) - state.heap->base());
}

void throw_size_mismatch(const char* where, std::size_t given, std::size_t expected) {
  throw Error(Errc::kInvalidArgument, std::string(where) + ": got " + std::to_string(given) +
                                          " values for a buffer of " + std::to_string(expected));
}

}  // namespace detail

Context Context::from_env(const ContextOptions& options) {
  return Context(bootstrap_from_env(), options);
}

Context::Context(std::unique_ptr<Bootstrap> bootstrap, const ContextOptions& options)
    : state_(std::make_shared<detail::ContextState>(std::move(bootstrap), options)) {}

Context::Context(Context&&) noexcept = default;

Context& Context::operator=(Context&& other) noexcept {
  if (this != &other) {
    Context(std::move(*this));  // the old state says goodbye to its peers first
    state_ = std::move(other.state_);
  }
  return *this;
}

Context::~Context() {
  if (!state_) return;
  try {
    state_->barrier();
  } catch (const std::exception& error) {
    detail::log(detail::LogLevel::kError, "context teardown: ", error.what());
  }
}

int Context::rank() const {
  return state_->topology.rank;
}
int Context::world_size() const {
  return state_->topology.world_size;
}
int Context::local_rank() const {
  return state_->topology.local_rank;
}
int Context::local_world_size() const {
  return state_->topology.local_world_size;
}
int Context::cuda_device() const {
  return state_->cuda_device;
}
Bootstrap& Context::bootstrap() const {
  return *state_->bootstrap;
}

HeapInfo Context::heap() const {
  const detail::SymmetricHeap& heap = *state_->heap;
  HeapInfo info;
  info.base = heap.base();
  info.size = heap.size();
  info.stride = heap.stride();
  info.window = heap.window();
  info.transport = heap.transport();
  // The block barriers are Iris's own: reserved, not in use by the application.
  info.reserved = device::detail::kReservedHeapBytes + state_->block_barriers_bytes;
  info.in_use = state_->allocator->bytes_in_use() - state_->block_barriers_bytes;
  info.live_allocations = state_->allocator->live_count() - 1;  // less the block barriers
  return info;
}

bool Context::contains(const void* ptr) const {
  return device().contains(ptr);
}

device::Context Context::device() const {
  const detail::SymmetricHeap& heap = *state_->heap;
  return device::Context(
      rank(), world_size(), heap.base(), heap.size(), heap.stride(), heap.device_peer_bases(),
      state_->mailbox_device, state_->wait_timeout_ns, state_->debug_checks,
      reinterpret_cast<std::uint64_t*>(heap.base() + state_->block_barriers_offset));
}

void Context::barrier() {
  state_->barrier();
}

Barriers Context::make_barriers(const iris::team& team, int count, std::source_location where) {
  const auto describe = [&] {
    return "make_barriers: team {start " + std::to_string(team.start) + ", size " +
           std::to_string(team.size) + ", stride " + std::to_string(team.stride) + "}";
  };
  if (!team.fits(world_size())) {
    throw Error(Errc::kInvalidArgument,
                describe() + " does not fit in the world of " + std::to_string(world_size()) +
                    " ranks (size and stride at least 1, every member a rank)",
                0, where);
  }
  if (count < 1) {
    throw Error(Errc::kInvalidArgument,
                describe() + ": " + std::to_string(count) + " channels; at least 1", 0, where);
  }
  const int per_channel = device::detail::channel_slots(team.size);
  auto slots = zeros<std::uint64_t>(static_cast<std::size_t>(per_channel) * count, where);
  const device::Barriers handle(slots.data(), team, count, per_channel, rank());
  return Barriers(std::move(slots), handle);
}

void Context::check_device_errors() const {
  state_->throw_if_device_reported();
}

void* Context::allocate_bytes(std::size_t bytes, std::size_t alignment,
                              std::source_location where) {
  if (alignment > state_->heap->max_alignment()) {
    throw Error(Errc::kInvalidArgument,
                "alignment " + std::to_string(alignment) + " exceeds the heap's " +
                    std::to_string(state_->heap->max_alignment()) + "-byte alignment",
                0, where);
  }
  state_->make_current();
  const std::size_t offset =
      detail::checked_allocate(*state_->allocator, state_->check.get(), bytes, alignment, where);
  return state_->heap->base() + offset;
}

void Context::free_bytes(void* ptr, std::source_location where) {
  if (!contains(ptr)) {
    throw Error(Errc::kInvalidArgument, "free_bytes: the pointer is not in this rank's heap", 0,
                where);
  }
  detail::checked_free(*state_->allocator, state_->check.get(),
                       detail::heap_offset_of(*state_, ptr), where);
}

}  // namespace iris
