// The movement collectives' kernels (bytes only): all_gather, all_to_all(v), broadcast, gather,
// scatter, send, recv, one kernel per collective from one template; block c moves slice c of
// every part it handles and meets block c of the other members before (their buffers are ready)
// and after (everyone is done with them). The barrier has a kernel of its own.
#include <algorithm>
#include <array>
#include <string>
#include <utility>

#include "ccl/launch.hpp"
#include "iris/ccl/detail/args.hpp"
#include "iris/ccl/detail/device_impl.hpp"
#include "iris/host/error.hpp"

namespace iris::ccl::detail {

namespace {

using iris::device::get;
using iris::device::put;

/// Bytes [first, first + n) of a part of `bytes` bytes that block `c` of `blocks` moves, when
/// each block takes `tile` bytes.
struct Slice {
  std::size_t first = 0, n = 0;
};
IRIS_DEVICE_FN IRIS_FORCEINLINE Slice slice_of(std::size_t bytes, std::size_t tile, unsigned c) {
  const std::size_t first = static_cast<std::size_t>(c) * tile;
  if (first >= bytes) return {bytes, 0};
  return {first, bytes - first < tile ? bytes - first : tile};
}

/// An even split of `bytes` over the grid, in 256-byte units (per-peer sizes known on the
/// device only: all_to_allv, recv).
IRIS_DEVICE_FN IRIS_FORCEINLINE std::size_t even_tile(std::size_t bytes) {
  const std::size_t per = (bytes + gridDim.x - 1) / gridDim.x;
  return (per + 255) / 256 * 256;
}

/// all_to_allv's part from member k: byte offsets into dst (here) and src (on member k), and its
/// bytes.
struct VPart {
  std::size_t dst_at, src_at, bytes;
  std::int64_t sent, at, room, into;  ///< the four table entries it comes from
};

IRIS_DEVICE_FN IRIS_FORCEINLINE VPart v_part(const MoveParams& p, int me, int k) {
  const auto& ctx = p.comm.ctx;
  const int from = p.comm.world_rank(k);
  VPart part;
  part.sent = *ctx.translate(p.send_counts + me, from);
  part.at = *ctx.translate(p.send_offsets + me, from);
  part.room = p.recv_counts[k];
  part.into = p.recv_offsets[k];
  const auto eb = p.element_bytes;
  part.dst_at = static_cast<std::size_t>(part.into) * eb;
  part.src_at = static_cast<std::size_t>(part.at) * eb;
  part.bytes = part.sent > 0 ? static_cast<std::size_t>(part.sent) * eb : 0;
  return part;
}

/// Whether `count` elements of `element` bytes from element `index` past heap byte `base` end
/// inside a heap of `heap` bytes (no product can overflow on the way).
IRIS_DEVICE_FN IRIS_FORCEINLINE bool fits_heap(std::size_t base, std::uint64_t index,
                                               std::uint64_t count, std::size_t element,
                                               std::size_t heap) {
  if (base > heap) return false;
  std::size_t room = heap - base;
  if (index > room / element) return false;
  room -= static_cast<std::size_t>(index) * element;
  return count <= room / element;
}

/// Reports and traps unless member k's part for this member is one all_to_allv can copy: no
/// negative entry, no more elements sent than recv_counts[k] takes, both spans on the heap.
IRIS_DEVICE_FN void check_v_part(const MoveParams& p, int me, int k) {
  namespace dd = iris::device::detail;
  const auto& ctx = p.comm.ctx;
  const int from = p.comm.world_rank(k);
  const VPart part = v_part(p, me, k);
  auto bad = [&](const char* operation, int rank, std::int64_t value) {
    dd::report_and_trap(ctx, {.kind = dd::ErrorKind::kBadCount,
                              .operation = operation,
                              .target_rank = rank,
                              .value_kind = dd::ValueKind::kSigned,
                              .observed = static_cast<std::uint64_t>(value)});
  };
  if (part.sent < 0) bad("ccl all_to_allv send_counts", from, part.sent);
  if (part.at < 0) bad("ccl all_to_allv send_offsets", from, part.at);
  if (part.room < 0) bad("ccl all_to_allv recv_counts", ctx.rank(), part.room);
  if (part.into < 0) bad("ccl all_to_allv recv_offsets", ctx.rank(), part.into);
  if (part.sent > part.room)
    dd::report_and_trap(ctx, {.kind = dd::ErrorKind::kMessageTooLarge,
                              .operation = "ccl all_to_allv",
                              .target_rank = from,
                              .expected = static_cast<std::uint64_t>(part.room) * p.element_bytes,
                              .observed = part.bytes});
  const std::size_t heap = ctx.heap_size();
  const auto dst_base = static_cast<std::size_t>(dd::local_heap_offset(ctx, p.dst));
  const auto src_base = static_cast<std::size_t>(dd::local_heap_offset(ctx, p.src));
  if (!fits_heap(dst_base, part.into, part.sent, p.element_bytes, heap))
    dd::report_and_trap(ctx, {.kind = dd::ErrorKind::kOutsideHeap,
                              .operation = "ccl all_to_allv dst",
                              .target_rank = ctx.rank(),
                              .heap_offset = dd::local_heap_offset(ctx, p.dst + part.dst_at),
                              .bytes = part.bytes});
  if (!fits_heap(src_base, part.at, part.sent, p.element_bytes, heap))
    dd::report_and_trap(ctx, {.kind = dd::ErrorKind::kOutsideHeap,
                              .operation = "ccl all_to_allv src",
                              .target_rank = from,
                              .heap_offset = dd::local_heap_offset(ctx, p.src + part.src_at),
                              .bytes = part.bytes});
}

// clang-format off
/// What a timed-out exchange reports (the operation field holds at most 31 characters).
__device__ const char* const kEntryNames[] = {
    "ccl all_gather(pull) entry", "ccl all_gather(push) entry", "ccl all_to_all entry",
    "ccl all_to_allv entry", "ccl broadcast entry", "ccl gather entry", "ccl scatter entry",
    "ccl send", "ccl recv", "ccl barrier", "ccl all_gather_2d entry",
    "ccl all_gather(ring) entry", "ccl all_to_all(push) entry", "ccl gather(push) entry"};
__device__ const char* const kExitNames[] = {
    "ccl all_gather(pull) exit", "ccl all_gather(push) exit", "ccl all_to_all exit",
    "ccl all_to_allv exit", "ccl broadcast exit", "ccl gather exit", "ccl scatter exit",
    "ccl send", "ccl recv", "ccl barrier", "ccl all_gather_2d exit",
    "ccl all_gather(ring) exit", "ccl all_to_all(push) exit", "ccl gather(push) exit"};
__device__ const char* const kCallNames[] = {
    "ccl all_gather", "ccl all_gather", "ccl all_to_all", "ccl all_to_allv", "ccl broadcast",
    "ccl gather", "ccl scatter", "ccl send", "ccl recv", "ccl barrier", "ccl all_gather_2d",
    "ccl all_gather", "ccl all_to_all", "ccl gather"};
// clang-format on

/// Whether the call is in place, as each collective defines it (scatter: on the root only, so
/// not compared).
IRIS_DEVICE_FN IRIS_FORCEINLINE bool in_place_call(MoveKind kind, const MoveParams& p, int me) {
  switch (kind) {
    case MoveKind::kAllGatherPull:
    case MoveKind::kAllGatherPush:
    case MoveKind::kAllGatherRing:
    case MoveKind::kGather:
    case MoveKind::kGatherPush:
      return p.src == p.dst + static_cast<std::size_t>(me) * p.bytes;
    case MoveKind::kBroadcast:
      return p.dst == p.src;
    case MoveKind::kAllGather2d:
      return p.src == p.dst + static_cast<std::size_t>(me) * p.bytes && p.src_pitch == p.dst_pitch;
    default:
      return false;
  }
}

/// `Kind`: the collective (MoveParams::kind), one kernel each, so that each gets the registers
/// its own path needs, not the largest path's (the SM budget still follows the largest:
/// docs/ccl.md). `InFlight`: 16-byte vectors each thread keeps in flight while it moves bytes
/// (MoveParams::in_flight); the 2-D path keeps the device API's default.
template <MoveKind Kind, int InFlight>
__global__ void __launch_bounds__(kMaxThreads) move_kernel(const __grid_constant__ MoveParams p) {
  const device::Communicator& comm = p.comm;
  const auto& ctx = comm.ctx;
  const iris::block block;
  const unsigned c = blockIdx.x;
  const int channel = static_cast<int>(c);
  const int me = comm.index;
  const int members = comm.team.size;
  Control* control = detail::control(comm);

  if constexpr (Kind == MoveKind::kSend || Kind == MoveKind::kRecv) {
    const bool sending = Kind == MoveKind::kSend;
    EpochCounter* counter = sending ? &control->send[p.peer] : &control->recv[p.peer];
    const std::uint64_t seq = epoch_begin(counter);
    const int self = ctx.rank();
    if (sending) {
      // One thread announces the buffer to the receiver (which pulls it, on as many blocks as
      // its own call has: the sender need not know them), then waits until the receiver's
      // last block is done with it.
      if (threadIdx.x == 0) {
        *ctx.translate(&control->send_offset[self], p.peer) =
            p.bytes == 0 ? 0 : ctx.offset_of(p.src);
        *ctx.translate(&control->send_bytes[self], p.peer) = p.bytes;
        announce(comm, &control->ready[self], seq, p.peer);
        await(comm, &control->done[p.peer], seq, p.peer, "ccl send (receiver done)");
      }
      epoch_end(counter, seq);
      return;
    }
    __shared__ std::uint64_t offset, bytes;
    if (threadIdx.x == 0) {
      await(comm, &control->ready[p.peer], seq, p.peer, "ccl recv (sender ready)");
      offset = control->send_offset[p.peer];
      bytes = control->send_bytes[p.peer];
      // Every block checks before it copies anything: a message that does not fit is reported
      // whole, and no byte of it is written.
      if (bytes > p.bytes)
        iris::device::detail::report_and_trap(
            ctx, {.kind = iris::device::detail::ErrorKind::kMessageTooLarge,
                  .operation = "ccl recv",
                  .target_rank = p.peer,
                  .expected = p.bytes,
                  .observed = bytes});
    }
    __syncthreads();
    const Slice s = slice_of(bytes, p.tile, c);
    if (s.n != 0) {
      const std::byte* remote = ctx.at<const std::byte>(offset, ctx.rank());
      get<InFlight>(block, ctx, p.dst + s.first, remote + s.first, s.n, p.peer);
    }
    // The last block to finish tells the sender its buffer is free (its reads are done: every
    // thread has its bytes before the block syncs), and advances the count for the next recv.
    __syncthreads();
    if (threadIdx.x == 0) {
      const unsigned blocks = gridDim.x;
      bool last = blocks == 1;
      if (!last) {
        __threadfence();
        last = atomicAdd(&counter->finished, 1u) == blocks - 1;
      }
      if (last) {
        if (blocks != 1) counter->finished = 0;
        counter->value = seq;
        announce(comm, &control->done[self], seq, p.peer);
      }
    }
    return;
  }

  const std::uint64_t epoch = device::begin(comm);
  const auto kind = static_cast<int>(Kind);
  const bool rooted = Kind == MoveKind::kBroadcast || Kind == MoveKind::kGather ||
                      Kind == MoveKind::kGatherPush || Kind == MoveKind::kScatter;
  check_args(comm, epoch,
             {.code = static_cast<std::uint32_t>(kind),
              .count = Kind == MoveKind::kAllToAllv ? p.element_bytes : p.bytes,
              .count_name = Kind == MoveKind::kAllGather2d ? "row bytes" : "bytes",
              .rows = Kind == MoveKind::kAllGather2d ? p.rows : 0,
              .type = 0,
              .op = 0,
              .root = rooted ? static_cast<std::uint32_t>(p.root) : 0u,
              .in_place = in_place_call(Kind, p, me),
              .name = kCallNames[kind]},
             kEntryNames[kind]);
  const std::uint64_t entry = exchange_value(epoch, 0);
  if constexpr (Kind == MoveKind::kGatherPush) publish_root_dst(comm, p.root, p.dst);
  team_exchange(comm, channel, entry, kEntryNames[static_cast<int>(Kind)]);
  const Slice s = slice_of(p.bytes, p.tile, c);
  switch (Kind) {
    case MoveKind::kAllGatherPull: {
      // In place (on every member), member k's part is already at dst + k * bytes there.
      const bool in_place = p.src == p.dst + static_cast<std::size_t>(me) * p.bytes;
      for (int j = 0; j < members; ++j) {
        const int k = (me + j) % members;
        std::byte* out = p.dst + static_cast<std::size_t>(k) * p.bytes;
        if (in_place && k == me) continue;
        get<InFlight>(block, ctx, out + s.first, (in_place ? out : p.src) + s.first, s.n,
                      comm.world_rank(k));
      }
      break;
    }
    case MoveKind::kAllGatherPush: {
      std::byte* out = p.dst + static_cast<std::size_t>(me) * p.bytes;
      for (int j = 0; j < members; ++j) {
        const int k = (me + j) % members;
        if (k == me && out == p.src) continue;
        put<InFlight>(block, ctx, out + s.first, p.src + s.first, s.n, comm.world_rank(k));
      }
      break;
    }
    case MoveKind::kAllGatherRing:
      // Block c moves slice c of every part, reading from the left neighbour only, with a
      // signal per step from that neighbour's block c (iris/ccl/detail/ring.hpp).
      ring_all_gather<InFlight>(comm, channel, epoch, 0, p.dst + s.first, p.bytes, p.src + s.first,
                                s.n, p.src == p.dst + static_cast<std::size_t>(me) * p.bytes);
      break;
    case MoveKind::kAllToAll:
      for (int j = 0; j < members; ++j) {
        const int k = (me + j) % members;
        get<InFlight>(block, ctx, p.dst + static_cast<std::size_t>(k) * p.bytes + s.first,
                      p.src + static_cast<std::size_t>(me) * p.bytes + s.first, s.n,
                      comm.world_rank(k));
      }
      break;
    case MoveKind::kAllToAllPush:
      // Part k of my input goes to member k's output, at part me.
      for (int j = 0; j < members; ++j) {
        const int k = (me + j) % members;
        put<InFlight>(block, ctx, p.dst + static_cast<std::size_t>(me) * p.bytes + s.first,
                      p.src + static_cast<std::size_t>(k) * p.bytes + s.first, s.n,
                      comm.world_rank(k));
      }
      break;
    case MoveKind::kAllToAllv:
      // Every block checks every part (a thread per member) before it copies any: a bad table
      // is reported with nothing written.
      for (int k = static_cast<int>(threadIdx.x); k < members; k += static_cast<int>(blockDim.x))
        check_v_part(p, me, k);
      __syncthreads();
      for (int j = 0; j < members; ++j) {
        const int k = (me + j) % members;
        const VPart part = v_part(p, me, k);
        if (part.bytes == 0) continue;
        const Slice v = slice_of(part.bytes, even_tile(part.bytes), c);
        get<InFlight>(block, ctx, p.dst + part.dst_at + v.first, p.src + part.src_at + v.first, v.n,
                      comm.world_rank(k));
      }
      break;
    case MoveKind::kBroadcast:
      // In place (dst == src on every member), the root's data is at dst.
      if (!(me == p.root && p.dst == p.src))
        get<InFlight>(block, ctx, p.dst + s.first, p.src + s.first, s.n, comm.world_rank(p.root));
      break;
    case MoveKind::kGather:
      if (me == p.root) {
        // In place (on every member), member k's part is at dst + k * bytes there.
        const bool in_place = p.src == p.dst + static_cast<std::size_t>(me) * p.bytes;
        for (int j = 0; j < members; ++j) {
          const int k = (me + j) % members;
          std::byte* out = p.dst + static_cast<std::size_t>(k) * p.bytes;
          if (in_place && k == me) continue;
          get<InFlight>(block, ctx, out + s.first, (in_place ? out : p.src) + s.first, s.n,
                        comm.world_rank(k));
        }
      }
      break;
    case MoveKind::kGatherPush: {
      // Each member writes its part into the root's dst at part me (the root's own part is
      // already there in place).
      std::byte* out = root_dst(comm, p.root, p.dst) + static_cast<std::size_t>(me) * p.bytes;
      if (!(me == p.root && out == p.src))
        put<InFlight>(block, ctx, out + s.first, p.src + s.first, s.n, comm.world_rank(p.root));
      break;
    }
    case MoveKind::kScatter: {
      const std::byte* in = p.src + static_cast<std::size_t>(me) * p.bytes;
      if (!(me == p.root && p.dst == in))
        get<InFlight>(block, ctx, p.dst + s.first, in + s.first, s.n, comm.world_rank(p.root));
      break;
    }
    case MoveKind::kAllGather2d: {
      // Block c takes rows [c * tile, (c + 1) * tile) of every member's block. In place (on
      // every member), member k's block is already at dst + k * bytes there.
      using iris::device::tile_view;
      const std::size_t r0 = static_cast<std::size_t>(c) * p.tile;
      const std::size_t rows = r0 < p.rows ? (p.rows - r0 < p.tile ? p.rows - r0 : p.tile) : 0;
      const bool in_place = in_place_call(Kind, p, me);
      for (int j = 0; j < members && rows > 0; ++j) {
        const int k = (me + j) % members;
        if (in_place && k == me) continue;
        std::byte* out = p.dst + r0 * p.dst_pitch + static_cast<std::size_t>(k) * p.bytes;
        const std::byte* in = in_place ? out : p.src + r0 * p.src_pitch;
        get(block, ctx, tile_view<std::byte>{out, rows, p.bytes, p.dst_pitch},
            tile_view<const std::byte>{in, rows, p.bytes, in_place ? p.dst_pitch : p.src_pitch},
            comm.world_rank(k));
      }
      break;
    }
    case MoveKind::kBarrier:  // barrier_kernel (no movement kernel is made for it)
    case MoveKind::kSend:
    case MoveKind::kRecv:
      break;
  }
  team_exchange(comm, channel, entry + 1, kExitNames[static_cast<int>(Kind)]);
  device::end(comm, epoch);
}

using MoveKernel = void (*)(MoveParams);

/// The movement kernel of `Kind`: none for the barrier, which has a kernel of its own
/// (barrier_kernel), so that the table instantiates no kernel that is never launched.
template <MoveKind Kind, int InFlight>
constexpr MoveKernel move_kernel_or_none() {
  if constexpr (Kind == MoveKind::kBarrier) {
    return nullptr;
  } else {
    return &move_kernel<Kind, InFlight>;
  }
}

template <int InFlight, int... Kinds>
constexpr std::array<MoveKernel, sizeof...(Kinds)> move_kernels(
    std::integer_sequence<int, Kinds...>) {
  return {move_kernel_or_none<static_cast<MoveKind>(Kinds), InFlight>()...};
}

/// The movement kernel of `kind` (not the barrier) with `in_flight` (4 or 8) vectors in flight
/// per thread.
MoveKernel move_kernel_of(MoveKind kind, int in_flight) {
  static constexpr auto four = move_kernels<4>(std::make_integer_sequence<int, kMoveKinds>{});
  static constexpr auto eight = move_kernels<8>(std::make_integer_sequence<int, kMoveKinds>{});
  return (in_flight == 4 ? four : eight)[static_cast<int>(kind)];
}

/// The barrier collective: one warp meets every member on channel 0, as Context::device_barrier
/// meets the world, with the collectives' epoch and argument check. A kernel of its own, because
/// a barrier needs neither the movement kernel's 256-thread blocks nor its registers.
__global__ void __launch_bounds__(32)
    barrier_kernel(const __grid_constant__ device::Communicator comm) {
  const std::uint64_t epoch = device::begin(comm);
  const auto kind = static_cast<int>(MoveKind::kBarrier);
  check_args(comm, epoch,
             {.code = static_cast<std::uint32_t>(kind),
              .count = 0,
              .count_name = "bytes",
              .type = 0,
              .op = 0,
              .root = 0,
              .in_place = false,
              .name = kCallNames[kind]},
             kEntryNames[kind]);
  team_exchange(comm, 0, exchange_value(epoch, 0), kEntryNames[kind]);
  device::end(comm, epoch);
}

}  // namespace

void launch_move(const MoveParams& params, int blocks, int threads, cudaStream_t stream) {
  if (params.in_flight != 4 && params.in_flight != 8)
    throw Error(Errc::kInvalidArgument, "iris::ccl: movement vectors in flight " +
                                            std::to_string(params.in_flight) + " is not 4 or 8");
  const MoveKernel kernel = move_kernel_of(params.kind, params.in_flight);
  if (kernel == nullptr)
    throw Error(Errc::kInternal,
                "iris::ccl: launch_move was asked for the barrier, which has no movement kernel");
  kernel<<<blocks, threads, 0, stream>>>(params);
  IRIS_CUDA_CHECK(cudaGetLastError());
}

void launch_barrier(const device::Communicator& comm, cudaStream_t stream) {
  barrier_kernel<<<1, 32, 0, stream>>>(comm);
  IRIS_CUDA_CHECK(cudaGetLastError());
}

int resident_move_blocks(int threads) {
  int fewest = 1 << 30;
  for (int kind = 0; kind < kMoveKinds; ++kind) {
    if (static_cast<MoveKind>(kind) == MoveKind::kBarrier) continue;
    for (int in_flight : {4, 8}) {
      int n = 0;
      IRIS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &n, reinterpret_cast<const void*>(move_kernel_of(static_cast<MoveKind>(kind), in_flight)),
          threads, 0));
      fewest = std::min(fewest, n);
    }
  }
  return fewest;
}

}  // namespace iris::ccl::detail
