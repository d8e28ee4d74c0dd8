// The symmetric heap: one block of device memory per rank, every rank's block reachable from
// every rank. Collective to create; teardown is local (callers barrier before it).
#pragma once

#include <chrono>
#include <cstddef>
#include <vector>

#include "iris/host/bootstrap.hpp"
#include "iris/host/context.hpp"

namespace iris::detail {

/// Where the ranks of the job run: which share this host (computed once, by allgather).
struct Topology {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::vector<int> local_ranks;  ///< ranks on this host, ascending, this one included
};

Topology discover_topology(Bootstrap& bootstrap);

class SymmetricHeap {
 public:
  /// Collective. Makes this rank's heap of (at least) `bytes` bytes on `cuda_device` and maps
  /// every rank's. `transport` kAuto picks VMM when every rank's device supports POSIX-fd
  /// export, else cudaIpc, and logs why.
  SymmetricHeap(Bootstrap& bootstrap, const Topology& topology, int cuda_device, std::size_t bytes,
                HeapTransport transport, std::chrono::nanoseconds timeout);
  ~SymmetricHeap();
  SymmetricHeap(const SymmetricHeap&) = delete;
  SymmetricHeap& operator=(const SymmetricHeap&) = delete;

  std::byte* base() const { return base_of(rank_); }
  std::byte* base_of(int rank) const;
  std::size_t size() const { return size_; }
  /// Flat-window stride, or 0 when peers are reached through the table.
  std::ptrdiff_t stride() const { return stride_; }
  std::byte* window() const { return window_; }
  HeapTransport transport() const { return transport_; }
  /// Largest alignment an allocation can ask for: addresses are aligned to it on every rank.
  std::size_t max_alignment() const { return max_alignment_; }
  /// Device-visible table of heap bases (cudaIpc transport), else null.
  std::byte* const* device_peer_bases() const { return device_peer_bases_; }

 private:
  void create_vmm(Bootstrap& bootstrap, const Topology& topology, std::chrono::nanoseconds timeout);
  void create_ipc(Bootstrap& bootstrap);
  void release() noexcept;

  int rank_ = 0;
  int world_size_ = 1;
  int cuda_device_ = 0;
  std::size_t size_ = 0;
  std::size_t max_alignment_ = 256;
  HeapTransport transport_ = HeapTransport::kAuto;

  // VMM: one reservation of world_size * stride bytes, rank r mapped at window_ + r * stride_.
  std::byte* window_ = nullptr;
  std::ptrdiff_t stride_ = 0;
  std::vector<bool> mapped_;

  // cudaIpc: this rank's cudaMalloc block and the peers' opened handles.
  std::vector<std::byte*> peer_bases_;
  std::byte** device_peer_bases_ = nullptr;
};

/// Picks kVmm or kIpc for kAuto, collectively (every rank gets the same answer).
HeapTransport choose_transport(Bootstrap& bootstrap, int cuda_device, HeapTransport requested);

}  // namespace iris::detail
