// iris::device::Context: the handle a kernel receives to reach every rank's symmetric heap.
//
// Get it from the host with `ctx.device()` and pass it to kernels by value (it is small and
// trivially copyable; `const __grid_constant__ iris::device::Context` keeps it in the parameter
// bank). All of its functions are usable on the host as well, for pointer arithmetic.
//
// Translation is the core trick: a pointer into this rank's heap becomes the same object on rank
// `to` with one multiply-add, because all ranks' heaps are mapped into one flat address range,
// rank r's at base + r * stride. Translate once per tile, then ordinary loads and stores (or an
// existing CuTe/CUTLASS epilogue) act on the peer's memory directly. ctx.translate is the one
// translation of the API: with debug checks on (IRIS_DEBUG_CHECKS=1) it checks, in device code,
// that the target rank exists and that the translated bytes lie inside the heap, and reports and
// traps otherwise (iris/device/debug.hpp); with checks off it is the multiply-add alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "iris/device/detail/config.hpp"
#include "iris/device/team.hpp"

namespace iris::device {

class Context;
/// Where a failed wait or debug check leaves its report for the host (pinned host memory the
/// host Context owns). Opaque here: only Iris reads or writes it.
struct ErrorMailbox;
#if defined(__CUDACC__)
/// Declared here for Context::translate; see iris/device/debug.hpp.
IRIS_DEVICE_FN inline void check_access(const Context& ctx, const char* operation, const void* ptr,
                                        std::size_t bytes, int to);
#endif

namespace detail {
#if defined(__CUDACC__)
IRIS_DEVICE_FN inline void check_member(const Context& ctx, const char* operation, const team& t,
                                        int member);
#endif

/// U with the const and volatile qualifiers of T.
template <class T, class U>
using same_cv_t =
    std::conditional_t<std::is_volatile_v<T>,
                       std::conditional_t<std::is_const_v<T>, const volatile U, volatile U>,
                       std::conditional_t<std::is_const_v<T>, const U, U>>;
}  // namespace detail

class Context {
 public:
  Context() = default;

  /// Made by iris::Context::device(); applications do not call this. `peer_bases` is null when
  /// the heaps share one flat window (the normal case) and otherwise a device-visible table of
  /// world_size heap bases (the cudaIpc fallback). `block_barriers` is this rank's state of the
  /// world's block-barrier object (barrier(block, ctx)), heap memory the host Context made.
  IRIS_HOST_DEVICE Context(int rank, int world_size, std::byte* heap_base, std::size_t heap_size,
                           std::ptrdiff_t stride, std::byte* const* peer_bases,
                           ErrorMailbox* mailbox, std::uint64_t wait_timeout_ns, bool debug_checks,
                           std::uint64_t* block_barriers = nullptr)
      : rank_(rank),
        world_size_(world_size),
        heap_base_(heap_base),
        heap_size_(heap_size),
        stride_(stride),
        peer_bases_(peer_bases),
        mailbox_(mailbox),
        wait_timeout_ns_(wait_timeout_ns),
        debug_checks_(debug_checks),
        block_barriers_(block_barriers) {}

  IRIS_HOST_DEVICE int rank() const { return rank_; }
  IRIS_HOST_DEVICE int world_size() const { return world_size_; }
  /// This rank's heap as this process sees it.
  IRIS_HOST_DEVICE std::byte* heap_base() const { return heap_base_; }
  /// Bytes in each rank's heap (the same on every rank).
  IRIS_HOST_DEVICE std::size_t heap_size() const { return heap_size_; }
  /// Distance in bytes between consecutive ranks' heaps in the flat window; 0 in table mode.
  IRIS_HOST_DEVICE std::ptrdiff_t stride() const { return stride_; }
  IRIS_HOST_DEVICE bool is_flat() const { return peer_bases_ == nullptr; }
  IRIS_HOST_DEVICE std::uint64_t wait_timeout_ns() const { return wait_timeout_ns_; }
  IRIS_HOST_DEVICE bool debug_checks() const { return debug_checks_; }
  IRIS_HOST_DEVICE ErrorMailbox* mailbox() const { return mailbox_; }
  /// This rank's state of the world's block-barrier object, which barrier(block, ctx) uses.
  IRIS_HOST_DEVICE std::uint64_t* block_barriers() const { return block_barriers_; }

  /// True when `ptr` points into this rank's heap.
  IRIS_HOST_DEVICE bool contains(const void* ptr) const {
    const auto p = reinterpret_cast<std::uintptr_t>(ptr);
    const auto base = reinterpret_cast<std::uintptr_t>(heap_base_);
    return p >= base && p - base < heap_size_;
  }

  /// Offset of `ptr` (a pointer into this rank's heap) from the heap's start: the same number
  /// names the same object on every rank.
  IRIS_HOST_DEVICE std::size_t offset_of(const void* ptr) const {
    return static_cast<std::size_t>(reinterpret_cast<const std::byte*>(ptr) - heap_base_);
  }

  /// Base of rank `to`'s heap in this process's address space.
  IRIS_HOST_DEVICE std::byte* heap_base_of(int to) const {
    return is_flat() ? heap_base_ + static_cast<std::ptrdiff_t>(to - rank_) * stride_
                     : peer_bases_[to];
  }

  /// The object that `ptr` (a pointer into this rank's heap) names, on rank `to`; `count`
  /// elements from `ptr` are what the caller will touch. Precondition: 0 <= to < world_size()
  /// and the `count` elements lie in the heap; with debug checks on, device code checks both.
  ///   float* peer_row = ctx.translate(row, peer, cols);
  template <class T>
  IRIS_HOST_DEVICE T* translate(T* ptr, int to, std::size_t count = 1) const {
#if defined(__CUDA_ARCH__)
    if (debug_checks_) check_access(*this, "translate", ptr, count * sizeof(T), to);
#endif
    return translate_unchecked(ptr, to);
  }

  /// The same for member `member` (0 <= member < t.size) of team `t`: rank t.world_rank(member).
  ///   T* p = ctx.translate(ptr, tp, (tp.index_of(ctx.rank()) + 1) % tp.size);
  template <class T>
  IRIS_HOST_DEVICE T* translate(T* ptr, const team& t, int member, std::size_t count = 1) const {
#if defined(__CUDA_ARCH__)
    if (debug_checks_) detail::check_member(*this, "translate", t, member);
#endif
    return translate(ptr, t.world_rank(member), count);
  }

  /// translate without the debug check; the API's own calls use it after checking themselves.
  template <class T>
  IRIS_HOST_DEVICE T* translate_unchecked(T* ptr, int to) const {
    // Byte-pointer arithmetic (not integers) keeps the global address space visible to the
    // compiler, so accesses through the result stay LDG/STG; Byte carries T's cv-qualifiers.
    using Byte = detail::same_cv_t<T, std::byte>;
    const std::ptrdiff_t delta = is_flat() ? static_cast<std::ptrdiff_t>(to - rank_) * stride_
                                           : peer_bases_[to] - heap_base_;
    return reinterpret_cast<T*>(reinterpret_cast<Byte*>(ptr) + delta);
  }

  /// The object at heap offset `offset` on rank `to`.
  template <class T>
  IRIS_HOST_DEVICE T* at(std::size_t offset, int to) const {
    return reinterpret_cast<T*>(heap_base_of(to) + offset);
  }

 private:
  int rank_ = 0;
  int world_size_ = 1;
  std::byte* heap_base_ = nullptr;
  std::size_t heap_size_ = 0;
  std::ptrdiff_t stride_ = 0;
  std::byte* const* peer_bases_ = nullptr;
  ErrorMailbox* mailbox_ = nullptr;
  std::uint64_t wait_timeout_ns_ = 0;
  bool debug_checks_ = false;
  std::uint64_t* block_barriers_ = nullptr;
};

static_assert(std::is_trivially_copyable_v<Context>,
              "device::Context is passed to kernels by value");

}  // namespace iris::device

#if defined(__CUDACC__)
#include "iris/device/detail/debug_impl.hpp"
#endif
