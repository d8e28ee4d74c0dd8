// Data movement between ranks: load, store, get, put, copy.
//
//   // the block sends n floats to rank 1, then raises rank 1's copy of `flag`
//   iris::device::put(iris::block{}, ctx, dst, src, n, 1, iris::device::signal_add(flag, 1));
//   // the warp fetches rank 2's copy of a 2-D tile into local memory
//   iris::device::get(iris::warp{}, ctx, local_tile, remote_tile, 2);
//
// Pointers to symmetric objects are this rank's copy (what Context::zeros and friends return);
// the call translates them to the rank named by the argument after them. Pointers documented
// as "local" may be any memory this thread can use (heap, cudaMalloc, shared memory).
//
// The group (first argument: iris::thread, warp, warps<N>, warp_span, block, grid, or a
// Cooperative Groups object) splits the elements among its members; every member calls with the
// same arguments. Ranges have any length and alignment: equally aligned source and destination
// move in 16-byte vectors, several in flight per thread (the InFlight template argument, 4 by
// default: put<2>(...) keeps two), with narrower units only at the ends; otherwise they move in
// the widest unit both share. 2-D tiles (tile_view) have their own row strides on either side;
// rows are shared out to warps.
//
// Performance: a bulk move runs fastest as one pass, a block (or warp) per tile of a few
// kilobytes, with as many blocks as tiles; a persistent grid that loops over tiles is somewhat
// slower. Fewer vectors in flight per thread save registers (more resident blocks) and suit
// warp- and thread-level moves; block-level bulk moves like more (benchmarks/rma_bandwidth.cu
// measures both).
//
// Ordering: the data moves with plain (weak) loads and stores. Without a completion action
// nothing is promised about when the destination sees it. Publish it as iris/device/signal.hpp
// says (the one rule): with a completion action as the last argument
// (iris::device::signal_set(flag, value) / signal_add(flag, value): the group syncs, then its
// leader releases the flag on the destination rank at system scope), with a later
// signal(group, ...), or with a barrier. Data read by get/load is whatever the source holds when
// it is read: acquire a flag (wait_until) first. When get returns, each member's part has arrived
// in local memory; sync the group before members read each other's parts.
#pragma once

#include <cuda/std/array>
#include <cuda/std/type_traits>

#include <cstddef>

#include "iris/device/context.hpp"
#include "iris/device/coop.hpp"
#include "iris/device/signal.hpp"
#include "iris/device/tile.hpp"

namespace iris::device {

/// 16-byte vectors each thread of get/put/copy keeps in flight unless the call says otherwise.
inline constexpr int kVectorsInFlight = 4;

// ---- registers -------------------------------------------------------------------------------

/// Rank `from`'s copy of `*src`; a plain load.
///   float x = iris::device::load(ctx, values + i, peer);
template <class T>
IRIS_DEVICE_FN T load(const Context& ctx, const T* src, int from);

/// Writes `value` to rank `to`'s copy of `*dst`; a plain store.
///   iris::device::store(ctx, values + i, x, peer);
template <class T>
IRIS_DEVICE_FN void store(const Context& ctx, T* dst, cuda::std::type_identity_t<T> value, int to);

/// The group reads group.num_threads() * N consecutive elements of rank `from`'s copy of `src`:
/// member r gets elements [r*N, r*N + N). Elements at or past `count` are not read and come back as
/// T{}. With N * sizeof(T) a multiple of 16 and `src` 16-byte aligned, each member reads
/// 16-byte vectors.
///   auto v = iris::device::load<4>(iris::warp{}, ctx, src, n, peer);   // 4 floats per lane
template <std::size_t N, cooperative_group G, class T>
IRIS_DEVICE_FN cuda::std::array<T, N> load(G group, const Context& ctx, const T* src,
                                           std::size_t count, int from);

/// The inverse of the group load: member r writes `values` to elements [r*N, r*N + N) of rank
/// `to`'s copy of `dst`, leaving out elements at or past `count`.
///   iris::device::store(iris::warp{}, ctx, dst, v, n, peer);
template <cooperative_group G, class T, std::size_t N>
IRIS_DEVICE_FN void store(G group, const Context& ctx, T* dst, const cuda::std::array<T, N>& values,
                          std::size_t count, int to);

// ---- 1-D ranges ------------------------------------------------------------------------------

/// Copies `count` elements of rank `from`'s copy of `src` to local `dst`.
///   iris::device::get(iris::block{}, ctx, staging, remote_rows, n, peer);
template <int InFlight = kVectorsInFlight, cooperative_group G, class T>
IRIS_DEVICE_FN void get(G group, const Context& ctx, T* dst, const T* src, std::size_t count,
                        int from);

/// Copies `count` elements of local `src` to rank `to`'s copy of `dst`, then runs the optional
/// completion action on rank `to`.
///   iris::device::put(iris::warp{}, ctx, dst, src, n, peer, iris::device::signal_set(flag,
///   round));
template <int InFlight = kVectorsInFlight, cooperative_group G, class T, class Signal = no_signal>
IRIS_DEVICE_FN void put(G group, const Context& ctx, T* dst, const T* src, std::size_t count,
                        int to, Signal signal = {});

/// Copies `count` elements from rank `from`'s copy of `src` to rank `to`'s copy of `dst` (any two
/// ranks, this one included), then runs the optional completion action on rank `to`. Arguments
/// in put's and get's order: dst, src, count, then put's `to` and get's `from`.
///   iris::device::copy(iris::block{}, ctx, dst, src, n, right, left,
///                      iris::device::signal_add(flag, 1));
template <int InFlight = kVectorsInFlight, cooperative_group G, class T, class Signal = no_signal>
IRIS_DEVICE_FN void copy(G group, const Context& ctx, T* dst, const T* src, std::size_t count,
                         int to, int from, Signal signal = {});

// ---- 2-D tiles -------------------------------------------------------------------------------
// `dst` and `src` must have the same rows and cols (debug checks verify it); strides may differ.

/// Copies rank `from`'s copy of tile `src` to the local tile `dst`.
///   iris::device::get(iris::block{}, ctx, smem_tile, remote_tile, peer);
template <int InFlight = kVectorsInFlight, cooperative_group G, class T>
IRIS_DEVICE_FN void get(G group, const Context& ctx, tile_view<T> dst,
                        cuda::std::type_identity_t<tile_view<const T>> src, int from);

/// Copies the local tile `src` to rank `to`'s copy of tile `dst`, then runs the optional
/// completion action on rank `to`.
///   iris::device::put(iris::block{}, ctx, out_tile, acc_tile, peer,
///                     iris::device::signal_add(flag, 1));
template <int InFlight = kVectorsInFlight, cooperative_group G, class T, class Signal = no_signal>
IRIS_DEVICE_FN void put(G group, const Context& ctx, tile_view<T> dst,
                        cuda::std::type_identity_t<tile_view<const T>> src, int to,
                        Signal signal = {});

/// Copies rank `from`'s copy of tile `src` to rank `to`'s copy of tile `dst`, then runs the
/// optional completion action on rank `to`.
///   iris::device::copy(iris::block{}, ctx, dst_tile, src_tile, right, left);
template <int InFlight = kVectorsInFlight, cooperative_group G, class T, class Signal = no_signal>
IRIS_DEVICE_FN void copy(G group, const Context& ctx, tile_view<T> dst,
                         cuda::std::type_identity_t<tile_view<const T>> src, int to, int from,
                         Signal signal = {});

}  // namespace iris::device

#include "iris/device/detail/rma_impl.hpp"
