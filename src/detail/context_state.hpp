// The state behind iris::Context and its Buffers. Buffers share it, so the heap stays mapped
// until the Context and every Buffer made from it are gone.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "detail/allocation_check.hpp"
#include "detail/allocator.hpp"
#include "detail/heap.hpp"
#include "iris/device/detail/mailbox.hpp"
#include "iris/host/context.hpp"

namespace iris::detail {

class ContextState {
 public:
  ContextState(std::unique_ptr<Bootstrap> bootstrap, const ContextOptions& options);
  ~ContextState();
  ContextState(const ContextState&) = delete;
  ContextState& operator=(const ContextState&) = delete;

  /// Makes this context's device current on the calling thread.
  void make_current() const;
  /// Waits for all work on this rank's device; throws the device's report if a bounded wait
  /// timed out, or the CUDA error.
  void synchronize_device() const;
  void throw_if_device_reported() const;
  /// Device sync, then every rank meets.
  void barrier();

  std::unique_ptr<Bootstrap> bootstrap;
  Topology topology;
  int cuda_device = 0;
  cudaStream_t stream = nullptr;  // fills and copies
  std::unique_ptr<SymmetricHeap> heap;
  std::unique_ptr<HeapAllocator> allocator;
  std::unique_ptr<AllocationCheck> check;  // null unless debug checks are on
  // The world's block-barrier object (barrier(block, ctx)): the heap's first allocation, at the
  // same offset on every rank; it lives as long as the allocator.
  std::size_t block_barriers_offset = 0;
  std::size_t block_barriers_bytes = 0;            // what the allocator counts for it
  device::ErrorMailbox* mailbox = nullptr;         // host-pinned, mapped
  device::ErrorMailbox* mailbox_device = nullptr;  // the same, as the device sees it
  std::uint64_t wait_timeout_ns = 0;
  bool debug_checks = false;
};

}  // namespace iris::detail
