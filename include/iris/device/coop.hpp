// Who cooperates in a call, as a value: the first argument of put/get/copy/load/store, signals,
// waits and barriers.
//
//   iris::device::put(iris::block{}, ctx, dst, src, count, peer);   // the whole block moves it
//   iris::device::put(iris::warp{}, ctx, dst, src, count, peer);     // this warp moves it
//   iris::device::put(iris::thread{}, ctx, dst, src, count, peer);   // this thread alone
//   iris::device::put(cg::this_thread_block(), ctx, dst, src, count, peer);  // Cooperative Groups
//
// Every member of the group must make the call, with the same arguments; members split the work
// among themselves by thread_rank(). A group is any value with the Cooperative Groups subset
// `thread_rank()`, `num_threads()` and (for calls that synchronize) `sync()`, so
// cg::this_thread_block() and cg::tiled_partition<32>(block) work as they are.
//
//   type                     members                            sync()
//   iris::thread             the calling thread                 nothing
//   iris::warp               the 32 threads of a warp           __syncwarp()
//   iris::warps<N>           N consecutive warps of a block,    named barrier 8 + group index
//                            e.g. warps<4> = a warpgroup        (N = 1: __syncwarp())
//   iris::warp_span{f, n, id} warps [f, f + n) of the block     named barrier `id` (the caller's)
//   iris::block              every thread of the block          __syncthreads() (barrier 0)
//   iris::grid               every thread of the grid           none: only barrier() and data
//                                                               movement without a signal
//   cg::thread_block, cg::thread_block_tile<32>, ...            their own sync()
//
// Named barriers: the hardware has 16 per block (ids 0-15); __syncthreads() is id 0 and CUTLASS
// reserves 1-7 for its own epilogues and pipelines. iris::warps<N> uses ids 8-15 (group k takes
// 8 + k), so a block holds at most 8 such groups (e.g. warps<4> in a 1024-thread block). A ninth
// group that syncs in a device API call (signal, group wait, barrier) is reported ("iris::warps<2>
// group 8 has no named barrier to sync on (blockDim 576 ...") and traps; its own sync() traps. Code
// that uses ids 8-15 itself, or needs more groups, names its own with warp_span.
//
// Warps are formed from the linear thread index (x fastest), as the hardware forms them; a warp,
// warps<N> or warp_span group must be whole (blockDim a multiple of 32 threads).
#pragma once

#include <cstddef>
#include <cstdint>

#include "iris/device/detail/config.hpp"
#include "iris/device/detail/thread_index.hpp"

namespace iris {

/// The calling thread alone.
struct thread {
  IRIS_HOST_DEVICE static constexpr unsigned num_threads() { return 1; }
  IRIS_HOST_DEVICE static constexpr unsigned thread_rank() { return 0; }
  IRIS_DEVICE_FN static void sync() {}
};

/// The calling thread's warp (all 32 lanes must call).
struct warp {
  IRIS_HOST_DEVICE static constexpr unsigned num_threads() { return 32; }
  IRIS_DEVICE_FN static unsigned thread_rank() { return device::detail::lane_index(); }
  IRIS_DEVICE_FN static void sync() { __syncwarp(); }
};

/// First named-barrier id of iris::warps<N>, and how many groups fit behind it.
inline constexpr unsigned kWarpsFirstBarrier = 8;
inline constexpr unsigned kWarpsMaxGroups = 16 - kWarpsFirstBarrier;

/// N consecutive warps of the block: warps [k*N, k*N + N) form group k. warps<4> is a Hopper
/// warpgroup. sync() uses named barrier 8 + k (ids 8-15, clear of CUTLASS's 1-7), so a block
/// holds at most 8 such groups; a ninth group's sync() traps (inside a device API call, after a
/// report naming the group, N and blockDim).
template <unsigned N>
struct warps {
  static_assert(N >= 1 && N <= 32, "iris::warps<N>: a block has 1 to 32 warps");
  IRIS_HOST_DEVICE static constexpr unsigned num_threads() { return 32 * N; }
  IRIS_DEVICE_FN static unsigned thread_rank() {
    return device::detail::linear_thread_index() % (32 * N);
  }
  /// Which group of the block the calling thread is in.
  IRIS_DEVICE_FN static unsigned index() {
    return device::detail::linear_thread_index() / (32 * N);
  }
  IRIS_DEVICE_FN static void sync() {
    if constexpr (N == 1) {
      __syncwarp();
    } else {
      const unsigned k = index();
      if (k >= kWarpsMaxGroups) device::detail::too_many_warp_groups(k);
      device::detail::named_barrier_sync(kWarpsFirstBarrier + k, 32 * N);
    }
  }
};

/// Warps [first, first + count) of the block, synchronized with the caller's named barrier
/// `barrier_id` (1-15; not one another group of the block uses at the same time). For a
/// warp-specialized kernel whose epilogue runs on some warps only:
///   const iris::warp_span epilogue{.first = 4, .count = 4, .barrier_id = 9};
///   iris::device::put(epilogue, ctx, dst, src, n, peer);
/// count == 1 syncs with __syncwarp() and uses no barrier id.
struct warp_span {
  unsigned first = 0;       ///< the span's first warp (linear thread index / 32)
  unsigned count = 1;       ///< warps in the span, at least 1
  unsigned barrier_id = 8;  ///< named barrier for sync(), 1-15

  IRIS_HOST_DEVICE constexpr unsigned num_threads() const { return 32 * count; }
  IRIS_DEVICE_FN unsigned thread_rank() const {
    return device::detail::linear_thread_index() - 32 * first;
  }
  IRIS_DEVICE_FN void sync() const {
    if (count == 1) {
      __syncwarp();
    } else {
      device::detail::named_barrier_sync(barrier_id, 32 * count);
    }
  }
};

/// Every thread of the block.
struct block {
  IRIS_DEVICE_FN static unsigned num_threads() { return device::detail::threads_per_block(); }
  IRIS_DEVICE_FN static unsigned thread_rank() { return device::detail::linear_thread_index(); }
  IRIS_DEVICE_FN static void sync() { __syncthreads(); }
};

/// Every thread of the grid. It has no sync(): blocks cannot wait for each other without
/// memory, so use iris::device::barrier(iris::grid{}, ctx), which needs every block resident.
struct grid {
  IRIS_DEVICE_FN static std::size_t num_threads() {
    return device::detail::blocks_per_grid() * device::detail::threads_per_block();
  }
  IRIS_DEVICE_FN static std::size_t thread_rank() {
    return device::detail::linear_block_index() * device::detail::threads_per_block() +
           device::detail::linear_thread_index();
  }
};

/// A cooperating group: iris::thread, warp, warps<N>, warp_span, block, grid, or a Cooperative
/// Groups object (anything with thread_rank() and num_threads()).
template <class G>
concept cooperative_group = requires(const G& g) {
  { g.thread_rank() };
  { g.num_threads() };
};

/// A group whose members can wait for each other (all but iris::grid). Signals, group waits and
/// barrier objects need it.
template <class G>
concept synchronizable_group = cooperative_group<G> && requires(const G& g) { g.sync(); };

}  // namespace iris
