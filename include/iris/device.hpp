// The Iris device API: everything a kernel needs to reach its peers. Header-only; include it
// from CUDA sources (iris/iris.hpp does so under nvcc).
//
//   __global__ void exchange(const __grid_constant__ iris::device::Context ctx, float* buf,
//                            const float* mine, std::size_t n, std::uint64_t* flag, int round) {
//     const int peer = (ctx.rank() + 1) % ctx.world_size();
//     iris::device::put(iris::block{}, ctx, buf, mine, n, peer, iris::device::signal_add(flag, 1));
//     iris::device::wait_until(iris::block{}, ctx, flag, iris::cmp::ge, round);
//     // buf now holds the left neighbour's data
//   }
//
//   iris/device/context.hpp   the device handle: rank, world size, pointer translation
//   iris/device/coop.hpp      who cooperates: iris::thread, warp, warps<N>, warp_span, block,
//                             grid, Cooperative Groups objects
//   iris/device/team.hpp      iris::team: a subset of the world's ranks (start, size, stride)
//   iris/device/order.hpp     memory orders and scopes: iris::relaxed .. acq_rel, cta, gpu, sys
//   iris/device/tile.hpp      tile_view and translate: reach a peer's tile in one step
//   iris/device/rma.hpp       load, store, get, put, copy (1-D ranges and 2-D tiles)
//   iris/device/atomic.hpp    atomics on any rank
//   iris/device/packet.hpp    small-message packets: payload and flag in one store
//   iris/device/signal.hpp    signal_set/add, group signals, wait_until (bounded), fence, quiet;
//                             the rule for publishing plain stores
//   iris/device/barrier.hpp   barrier objects (teams, channels, arrive/wait/sync) and the
//                             world barriers of a block or the whole grid
//   iris/device/debug.hpp     debug checks of every translated access
#pragma once

#include "iris/device/atomic.hpp"
#include "iris/device/barrier.hpp"
#include "iris/device/cmp.hpp"
#include "iris/device/context.hpp"
#include "iris/device/coop.hpp"
#include "iris/device/debug.hpp"
#include "iris/device/order.hpp"
#include "iris/device/packet.hpp"
#include "iris/device/rma.hpp"
#include "iris/device/signal.hpp"
#include "iris/device/team.hpp"
#include "iris/device/tile.hpp"
