#include "detail/heap.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>

#include "detail/driver.hpp"
#include "detail/fd_passing.hpp"
#include "detail/log.hpp"
#include "iris/host/error.hpp"

namespace iris::detail {
namespace {

std::size_t round_up(std::size_t value, std::size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

/// What every rank must know about every other rank's device to map its heap.
struct DeviceIdentity {
  cudaUUID_t uuid{};
  std::uint8_t vmm_capable = 0;
  std::uint64_t size = 0;  // heap bytes requested (rounded)
  std::uint64_t granularity = 0;
};

CUmemAllocationProp allocation_properties(int cuda_device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = cuda_device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

/// Whether this device can export VMM memory as POSIX fds; `why` says why not.
bool vmm_supported(int cuda_device, std::string& why) {
  try {
    CUdevice device = 0;
    IRIS_CU_CHECK(driver().device_get(&device, cuda_device));
    int vmm = 0, posix_fd = 0;
    IRIS_CU_CHECK(driver().device_get_attribute(
        &vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device));
    IRIS_CU_CHECK(driver().device_get_attribute(
        &posix_fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, device));
    if (!vmm)
      why = "the device does not support virtual memory management";
    else if (!posix_fd)
      why = "the device cannot export memory as POSIX file descriptors";
    return vmm && posix_fd;
  } catch (const Error& error) {
    why = error.what();
    return false;
  }
}

std::string uuid_text(const cudaUUID_t& uuid) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text;
  for (char byte : uuid.bytes) {
    text += kHex[(static_cast<unsigned char>(byte) >> 4) & 0xF];
    text += kHex[static_cast<unsigned char>(byte) & 0xF];
  }
  return text;
}

/// The visible device ordinal with this UUID, or -1.
int device_with_uuid(const cudaUUID_t& uuid) {
  int count = 0;
  IRIS_CUDA_CHECK(cudaGetDeviceCount(&count));
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    cudaDeviceProp prop{};
    IRIS_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
    if (std::memcmp(prop.uuid.bytes, uuid.bytes, sizeof(uuid.bytes)) == 0) return ordinal;
  }
  return -1;
}

std::vector<DeviceIdentity> gather_devices(Bootstrap& bootstrap, const DeviceIdentity& mine) {
  std::vector<DeviceIdentity> all(bootstrap.world_size());
  bootstrap.allgather(&mine, all.data(), sizeof(DeviceIdentity));
  return all;
}

}  // namespace

Topology discover_topology(Bootstrap& bootstrap) {
  Topology topology;
  topology.rank = bootstrap.rank();
  topology.world_size = bootstrap.world_size();
  topology.local_ranks = ranks_on_this_host(bootstrap);
  topology.local_world_size = static_cast<int>(topology.local_ranks.size());
  topology.local_rank = static_cast<int>(
      std::find(topology.local_ranks.begin(), topology.local_ranks.end(), topology.rank) -
      topology.local_ranks.begin());
  return topology;
}

HeapTransport choose_transport(Bootstrap& bootstrap, int cuda_device, HeapTransport requested) {
  std::string why;
  const std::uint8_t capable = vmm_supported(cuda_device, why) ? 1 : 0;
  std::vector<std::uint8_t> all(bootstrap.world_size());
  bootstrap.allgather(&capable, all.data(), 1);
  const auto incapable = std::find(all.begin(), all.end(), 0);
  if (requested == HeapTransport::kIpc) return HeapTransport::kIpc;
  if (incapable == all.end()) return HeapTransport::kVmm;
  const int which = static_cast<int>(incapable - all.begin());
  if (requested == HeapTransport::kVmm) {
    throw Error(Errc::kUnsupported, "IRIS_HEAP_TRANSPORT=vmm, but rank " + std::to_string(which) +
                                        " cannot use it" +
                                        (which == bootstrap.rank() ? ": " + why : ""));
  }
  log(LogLevel::kWarn, "symmetric heap: using cudaIpc handles, not VMM: rank ", which,
      " cannot export VMM memory", which == bootstrap.rank() ? " (" + why + ")" : std::string());
  return HeapTransport::kIpc;
}

SymmetricHeap::SymmetricHeap(Bootstrap& bootstrap, const Topology& topology, int cuda_device,
                             std::size_t bytes, HeapTransport transport,
                             std::chrono::nanoseconds timeout)
    : rank_(bootstrap.rank()),
      world_size_(bootstrap.world_size()),
      cuda_device_(cuda_device),
      size_(bytes),
      transport_(choose_transport(bootstrap, cuda_device, transport)) {
  if (bytes == 0) throw Error(Errc::kInvalidArgument, "the symmetric heap size must be positive");
  try {
    if (transport_ == HeapTransport::kVmm)
      create_vmm(bootstrap, topology, timeout);
    else
      create_ipc(bootstrap);
  } catch (...) {
    release();
    throw;
  }
}

SymmetricHeap::~SymmetricHeap() {
  release();
}

std::byte* SymmetricHeap::base_of(int rank) const {
  return transport_ == HeapTransport::kVmm ? window_ + static_cast<std::ptrdiff_t>(rank) * stride_
                                           : peer_bases_[rank];
}

void SymmetricHeap::create_vmm(Bootstrap& bootstrap, const Topology& topology,
                               std::chrono::nanoseconds timeout) {
  const Driver& cu = driver();
  const CUmemAllocationProp prop = allocation_properties(cuda_device_);
  std::size_t granularity = 0;
  IRIS_CU_CHECK(
      cu.mem_get_allocation_granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));

  DeviceIdentity mine;
  cudaDeviceProp prop_of_device{};
  IRIS_CUDA_CHECK(cudaGetDeviceProperties(&prop_of_device, cuda_device_));
  mine.uuid = prop_of_device.uuid;
  mine.size = round_up(size_, granularity);
  mine.granularity = granularity;
  const std::vector<DeviceIdentity> devices = gather_devices(bootstrap, mine);
  for (int r = 0; r < world_size_; ++r) {
    if (devices[r].size != mine.size) {
      throw Error(Errc::kMismatch, "ranks disagree on the heap size: rank " + std::to_string(r) +
                                       " asked for " + std::to_string(devices[r].size) +
                                       " bytes, rank " + std::to_string(rank_) + " for " +
                                       std::to_string(mine.size) + " (set IRIS_HEAP_SIZE alike)");
    }
  }
  if (topology.local_world_size != world_size_) {
    throw Error(Errc::kUnsupported,
                "the ranks span several hosts (" + std::to_string(topology.local_world_size) +
                    " of " + std::to_string(world_size_) +
                    " are on this one); a symmetric heap across hosts needs fabric handles, which "
                    "this version does not support");
  }
  // Every rank must reach every peer's device; agree on it before anything is exported.
  std::string unreachable;
  for (int r : topology.local_ranks) {
    if (std::memcmp(devices[r].uuid.bytes, mine.uuid.bytes, sizeof(mine.uuid.bytes)) == 0) continue;
    const int ordinal = device_with_uuid(devices[r].uuid);
    int can_access = 0;
    if (ordinal >= 0) IRIS_CUDA_CHECK(cudaDeviceCanAccessPeer(&can_access, cuda_device_, ordinal));
    if (!can_access) {
      unreachable = "rank " + std::to_string(rank_) + " (GPU " + std::to_string(cuda_device_) +
                    ") cannot access the GPU of rank " + std::to_string(r) + " (uuid " +
                    uuid_text(devices[r].uuid) + (ordinal < 0 ? ", not visible here" : "") +
                    ") over peer-to-peer";
      break;
    }
  }
  std::vector<std::uint8_t> ok(world_size_);
  const std::uint8_t my_ok = unreachable.empty();
  bootstrap.allgather(&my_ok, ok.data(), 1);
  if (!unreachable.empty()) throw Error(Errc::kUnsupported, unreachable);
  if (const auto bad = std::find(ok.begin(), ok.end(), 0); bad != ok.end()) {
    throw Error(Errc::kUnsupported, "rank " + std::to_string(bad - ok.begin()) +
                                        " cannot reach a peer's GPU over peer-to-peer");
  }

  size_ = mine.size;
  stride_ = static_cast<std::ptrdiff_t>(mine.size);
  max_alignment_ = granularity;
  CUdeviceptr window = 0;
  IRIS_CU_CHECK(cu.mem_address_reserve(&window, mine.size * world_size_, granularity, 0, 0));
  window_ = reinterpret_cast<std::byte*>(window);
  mapped_.assign(world_size_, false);

  // The mapping keeps the memory alive, so handles are released as soon as they are mapped.
  CUmemGenericAllocationHandle own = 0;
  IRIS_CU_CHECK(cu.mem_create(&own, mine.size, &prop, 0));
  int own_fd = -1;
  const CUresult exported =
      cu.mem_export_to_shareable_handle(&own_fd, own, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  const CUresult mapped =
      cu.mem_map(reinterpret_cast<CUdeviceptr>(base_of(rank_)), mine.size, 0, own, 0);
  cu.mem_release(own);
  IRIS_CU_CHECK(exported);
  UniqueFd own_file(own_fd);
  IRIS_CU_CHECK(mapped);
  mapped_[rank_] = true;

  std::vector<UniqueFd> peer_fds =
      exchange_fds(bootstrap, own_file.get(), topology.local_ranks, timeout);
  for (int r : topology.local_ranks) {
    if (r == rank_) continue;
    CUmemGenericAllocationHandle imported = 0;
    IRIS_CU_CHECK(cu.mem_import_from_shareable_handle(
        &imported, reinterpret_cast<void*>(static_cast<std::intptr_t>(peer_fds[r].get())),
        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    const CUresult peer_mapped =
        cu.mem_map(reinterpret_cast<CUdeviceptr>(base_of(r)), mine.size, 0, imported, 0);
    cu.mem_release(imported);
    IRIS_CU_CHECK(peer_mapped);
    mapped_[r] = true;
  }

  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = cuda_device_;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  IRIS_CU_CHECK(cu.mem_set_access(window, mine.size * world_size_, &access, 1));
  log(LogLevel::kDebug, "symmetric heap: VMM window at ", static_cast<void*>(window_), ", ",
      world_size_, " x ", mine.size, " bytes");
}

void SymmetricHeap::create_ipc(Bootstrap& bootstrap) {
  // cudaMalloc of a large block returns an address aligned to at least 2 MiB on current
  // drivers; the allocator may use any alignment up to what this base actually has.
  size_ = round_up(size_, std::size_t{2} << 20);
  peer_bases_.assign(world_size_, nullptr);
  void* own = nullptr;
  IRIS_CUDA_CHECK(cudaMalloc(&own, size_));
  peer_bases_[rank_] = static_cast<std::byte*>(own);
  const auto address = reinterpret_cast<std::uintptr_t>(own);
  max_alignment_ = std::min<std::size_t>(address & (~address + 1), std::size_t{2} << 20);

  struct Exported {
    cudaIpcMemHandle_t handle;
    std::uint64_t size;
    std::uint64_t max_alignment;
  } mine{};
  IRIS_CUDA_CHECK(cudaIpcGetMemHandle(&mine.handle, own));
  mine.size = size_;
  mine.max_alignment = max_alignment_;
  std::vector<Exported> all(world_size_);
  bootstrap.allgather(&mine, all.data(), sizeof(Exported));
  for (int r = 0; r < world_size_; ++r) {
    if (all[r].size != size_) {
      throw Error(Errc::kMismatch, "ranks disagree on the heap size: rank " + std::to_string(r) +
                                       " has " + std::to_string(all[r].size) + " bytes, rank " +
                                       std::to_string(rank_) + " " + std::to_string(size_));
    }
    max_alignment_ = std::min<std::size_t>(max_alignment_, all[r].max_alignment);
    if (r == rank_) continue;
    void* peer = nullptr;
    IRIS_CUDA_CHECK(cudaIpcOpenMemHandle(&peer, all[r].handle, cudaIpcMemLazyEnablePeerAccess));
    peer_bases_[r] = static_cast<std::byte*>(peer);
  }
  IRIS_CUDA_CHECK(
      cudaMalloc(reinterpret_cast<void**>(&device_peer_bases_), world_size_ * sizeof(std::byte*)));
  IRIS_CUDA_CHECK(cudaMemcpy(device_peer_bases_, peer_bases_.data(),
                             world_size_ * sizeof(std::byte*), cudaMemcpyHostToDevice));
  log(LogLevel::kDebug, "symmetric heap: cudaIpc, ", world_size_, " x ", size_, " bytes");
}

void SymmetricHeap::release() noexcept {
  // Teardown must not throw: it runs in destructors and on the failure path of construction.
  if (window_ != nullptr) {
    const Driver& cu = driver();
    for (int r = 0; r < static_cast<int>(mapped_.size()); ++r) {
      if (mapped_[r]) cu.mem_unmap(reinterpret_cast<CUdeviceptr>(base_of(r)), size_);
    }
    cu.mem_address_free(reinterpret_cast<CUdeviceptr>(window_),
                        static_cast<std::size_t>(stride_) * world_size_);
    window_ = nullptr;
    mapped_.clear();
  }
  for (int r = 0; r < static_cast<int>(peer_bases_.size()); ++r) {
    if (peer_bases_[r] == nullptr) continue;
    if (r == rank_)
      cudaFree(peer_bases_[r]);
    else
      cudaIpcCloseMemHandle(peer_bases_[r]);
  }
  peer_bases_.clear();
  if (device_peer_bases_ != nullptr) cudaFree(device_peer_bases_);
  device_peer_bases_ = nullptr;
}

}  // namespace iris::detail
