// Who cooperates in a call, as a type: the first argument of put/get/copy/load/store/barrier.
//
//   iris::device::put(iris::block{}, ctx, dst, src, count, peer);   // the whole block moves it
//   iris::device::put(iris::warp{}, ctx, dst, src, count, peer);     // this warp moves it
//   iris::device::put(iris::thread{}, ctx, dst, src, count, peer);   // this thread alone
//
// Every member of the group must make the call, with the same arguments; members split the work
// among themselves by rank(). A group is a tag: constructing one costs nothing.
//
//   type              members                          sync()
//   iris::thread      the calling thread               nothing
//   iris::warp        the 32 threads of a warp          __syncwarp()
//   iris::warps<N>    N consecutive warps of a block,   named barrier 1 + group index
//                     e.g. warps<4> = a warpgroup       (at most 15 groups per block)
//   iris::block       every thread of the block         __syncthreads()
//   iris::grid        every thread of the grid          none: only barrier() and data
//                                                       movement without a completion action
//
// Warps are formed from the linear thread index (x fastest), as the hardware forms them; a warp
// or warps<N> group must be whole (blockDim a multiple of 32 threads).
#pragma once

#include <cstddef>
#include <cstdint>

#include "iris/device/detail/config.hpp"
#include "iris/device/detail/thread_index.hpp"

namespace iris {

/// The calling thread alone.
struct thread {
  IRIS_DEVICE_FN static constexpr unsigned size() { return 1; }
  IRIS_DEVICE_FN static constexpr unsigned rank() { return 0; }
  IRIS_DEVICE_FN static void sync() {}
};

/// The calling thread's warp (all 32 lanes must call).
struct warp {
  IRIS_DEVICE_FN static constexpr unsigned size() { return 32; }
  IRIS_DEVICE_FN static unsigned rank() { return detail::lane_index(); }
  IRIS_DEVICE_FN static void sync() { __syncwarp(); }
};

/// N consecutive warps of the block: warps [k*N, k*N + N) form group k. warps<4> is a Hopper
/// warpgroup. sync() uses hardware named barrier 1 + k, so a block holds at most 15 such groups
/// and code that uses named barriers itself must keep clear of those ids.
template <unsigned N>
struct warps {
  static_assert(N >= 1 && N <= 32, "iris::warps<N>: a block has 1 to 32 warps");
  IRIS_DEVICE_FN static constexpr unsigned size() { return 32 * N; }
  IRIS_DEVICE_FN static unsigned rank() { return detail::linear_thread_index() % (32 * N); }
  /// Which group of the block the calling thread is in.
  IRIS_DEVICE_FN static unsigned index() { return detail::linear_thread_index() / (32 * N); }
  IRIS_DEVICE_FN static void sync() {
    if constexpr (N == 1) {
      __syncwarp();
    } else {
      detail::named_barrier_sync<32 * N>(1 + index());
    }
  }
};

/// Every thread of the block.
struct block {
  IRIS_DEVICE_FN static unsigned size() { return detail::threads_per_block(); }
  IRIS_DEVICE_FN static unsigned rank() { return detail::linear_thread_index(); }
  IRIS_DEVICE_FN static void sync() { __syncthreads(); }
};

/// Every thread of the grid. It has no sync(): blocks cannot wait for each other without
/// memory, so use iris::device::barrier(iris::grid{}, ctx), which needs every block resident.
struct grid {
  IRIS_DEVICE_FN static std::size_t size() {
    return detail::blocks_per_grid() * detail::threads_per_block();
  }
  IRIS_DEVICE_FN static std::size_t rank() {
    return detail::linear_block_index() * detail::threads_per_block() +
           detail::linear_thread_index();
  }
};

/// A cooperating group: thread, warp, warps<N>, block or grid.
template <class G>
concept cooperative_group = requires {
  {G::size()};
  {G::rank()};
};

/// A group whose members can wait for each other (all but grid). Completion actions need it.
template <class G>
concept synchronizable_group = cooperative_group<G> && requires {
  G::sync();
};

}  // namespace iris
