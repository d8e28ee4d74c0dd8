// The reducing collectives' kernels: all_reduce (one-shot and two-shot in packets, one-shot
// pull and push, two-shot), reduce_scatter (pull, ring) and reduce. One kernel per element type;
// the operator is chosen at run time.
#include <algorithm>
#include <cstdint>

#include "ccl/launch.hpp"
#include "iris/ccl/detail/args.hpp"
#include "iris/ccl/detail/device_impl.hpp"
#include "iris/device/packet.hpp"
#include "iris/host/error.hpp"

namespace iris::ccl::detail {

namespace {

static_assert(sizeof(iris::device::packet) == kPacketBytes &&
              iris::device::kPacketPayloadBytes == kPacketPayload);

/// The DataType of T, + 1 (the argument check's type code).
template <class T>
constexpr std::uint32_t type_code() {
  if constexpr (std::is_same_v<T, float>) return 1 + static_cast<std::uint32_t>(DataType::kFloat32);
  if constexpr (std::is_same_v<T, __half>)
    return 1 + static_cast<std::uint32_t>(DataType::kFloat16);
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return 1 + static_cast<std::uint32_t>(DataType::kBFloat16);
  if constexpr (std::is_same_v<T, std::int32_t>)
    return 1 + static_cast<std::uint32_t>(DataType::kInt32);
  if constexpr (std::is_same_v<T, std::int64_t>)
    return 1 + static_cast<std::uint32_t>(DataType::kInt64);
  return 1 + static_cast<std::uint32_t>(DataType::kUInt8);
}

/// Argument-check codes of the reducing kernels (the movement kernel's are its MoveKind).
constexpr std::uint32_t kReduceCodes = 16;
constexpr std::uint32_t kPacketCode = 32;

// clang-format off
__device__ const char* const kReduceNames[] = {"ccl all_reduce", "ccl all_reduce",
                                               "ccl all_reduce", "ccl reduce_scatter",
                                               "ccl reduce", "ccl reduce_scatter",
                                               "ccl reduce"};
__device__ const char* const kReduceEntryNames[] = {
    "ccl all_reduce (entry)", "ccl all_reduce (push)", "ccl all_reduce (entry)",
    "ccl reduce_scatter (entry)", "ccl reduce (entry)", "ccl reduce_scatter(ring) entry",
    "ccl reduce(push) entry"};
// clang-format on

/// The block writes src[0, n) to `row` (a symmetric address) on every other team member, each
/// 16-byte vector loaded once and stored to all of them (members in the order index + 1, index +
/// 2, ..., so that the members' blocks do not all write to one rank at once). `row` has src's
/// address modulo 16, so both are vectors or neither.
template <class T>
IRIS_DEVICE_FN void put_to_members(const device::Communicator& comm, T* row, const T* src,
                                   std::size_t n) {
  const int members = comm.team.size;
  const auto& ctx = comm.ctx;
  auto member = [&](int j) {
    const int k = comm.index + j;
    return comm.world_rank(k < members ? k : k - members);
  };
  std::size_t scalar_first = 0;
  if (aligned16(src)) {
    const std::size_t vectors = n * sizeof(T) / 16;
    scalar_first = vectors * 16 / sizeof(T);
    const auto* s = reinterpret_cast<const uint4*>(src);
    auto* d = reinterpret_cast<uint4*>(row);
    for (std::size_t i = threadIdx.x; i < vectors; i += blockDim.x) {
      const uint4 v = s[i];
      for (int j = 1; j < members; ++j) ctx.translate(d, member(j), vectors)[i] = v;
    }
  }
  for (std::size_t i = scalar_first + threadIdx.x; i < n; i += blockDim.x) {
    const T e = src[i];
    for (int j = 1; j < members; ++j) ctx.translate(row, member(j), n)[i] = e;
  }
}

/// What every reducing kernel starts with: the call's epoch (its arguments checked across the
/// team under debug checks) and this block's elements [first, first + n) of a part.
struct ReduceCall {
  std::uint64_t epoch;
  std::size_t first;
  std::size_t n;
};

template <class T>
IRIS_DEVICE_FN IRIS_FORCEINLINE ReduceCall begin_reduce(const ReduceParams& p) {
  const device::Communicator& comm = p.comm;
  ReduceCall c;
  c.epoch = device::begin(comm);
  c.first = static_cast<std::size_t>(blockIdx.x) * p.tile;
  const std::size_t last = c.first + p.tile < p.count ? c.first + p.tile : p.count;
  c.n = last > c.first ? last - c.first : 0;
  const T* dst = static_cast<const T*>(p.dst);
  const T* src = static_cast<const T*>(p.src);
  const auto kind = static_cast<int>(p.kind);
  // In place as each call defines it (reduce: the root's dst only matters, so not compared).
  const bool scatter =
      p.kind == ReduceKind::kReduceScatter || p.kind == ReduceKind::kReduceScatterRing;
  const bool rooted = p.kind == ReduceKind::kReduce || p.kind == ReduceKind::kReducePush;
  const bool in_place = scatter ? dst == src + static_cast<std::size_t>(comm.index) * p.count
                                : (!rooted && dst == src);
  check_args(comm, c.epoch,
             {.code = kReduceCodes + static_cast<std::uint32_t>(kind),
              .count = p.count,
              .count_name = "count",
              .type = type_code<T>(),
              .op = 1 + static_cast<std::uint32_t>(p.op),
              .root = rooted ? static_cast<std::uint32_t>(p.root) : 0u,
              .in_place = in_place,
              .name = kReduceNames[kind]},
             kReduceEntryNames[kind]);
  return c;
}

template <class T>
__global__ void __launch_bounds__(kMaxThreads)
    reduce_kernel(const __grid_constant__ ReduceParams p) {
  const device::Communicator& comm = p.comm;
  const ReduceCall c = begin_reduce<T>(p);
  const std::uint64_t epoch = c.epoch;
  const int channel = static_cast<int>(blockIdx.x);
  const std::size_t first = c.first;
  const std::size_t n = c.n;
  T* dst = static_cast<T*>(p.dst);
  const T* src = static_cast<const T*>(p.src);
  const device::Round round{epoch, channel, 0};
  switch (p.kind) {
    case ReduceKind::kAllReducePull:
      device::all_reduce(iris::block{}, comm, round, dst + first, src + first, n, p.op,
                         Algorithm::kOneShotPull);
      break;
    case ReduceKind::kAllReduceTwoShot:
      device::all_reduce(iris::block{}, comm, round, dst + first, src + first, n, p.op,
                         Algorithm::kTwoShot);
      break;
    case ReduceKind::kAllReducePush:  // all_reduce_push_kernel, never launched as this one
      break;
    case ReduceKind::kReduceScatter: {
      const std::uint64_t entry = exchange_value(epoch, 0);
      team_exchange(comm, channel, entry, "ccl reduce_scatter (entry)");
      reduce_span(comm, dst + first, false,
                  src + static_cast<std::size_t>(comm.index) * p.count + first, n, p.op);
      team_exchange(comm, channel, entry + 1, "ccl reduce_scatter (exit)");
      break;
    }
    case ReduceKind::kReduceScatterRing: {
      const std::uint64_t entry = exchange_value(epoch, 0);
      team_exchange(comm, channel, entry, "ccl reduce_scatter(ring) entry");
      if (comm.team.size < 2) {
        reduce_span(comm, dst + first, false,
                    src + static_cast<std::size_t>(comm.index) * p.count + first, n, p.op);
      } else {
        // This block's kRingSlots slots of the staging, at the same offset on every member.
        auto* staging = static_cast<acc_t<T>*>(p.staging) +
                        static_cast<std::size_t>(blockIdx.x) * kRingSlots * p.slot;
        ring_reduce_scatter<T>(comm, channel, epoch, dst, src, p.count, first, n, p.op, staging,
                               p.slot);
      }
      team_exchange(comm, channel, entry + 1, "ccl reduce_scatter(ring) exit");
      break;
    }
    case ReduceKind::kReduce: {
      const std::uint64_t entry = exchange_value(epoch, 0);
      team_exchange(comm, channel, entry, "ccl reduce (entry)");
      if (comm.index == p.root) reduce_span(comm, dst + first, false, src + first, n, p.op);
      team_exchange(comm, channel, entry + 1, "ccl reduce (exit)");
      break;
    }
    case ReduceKind::kReducePush: {
      // Member k reduces shard k of the elements (shard_of, as the host cut them; p.tile
      // elements a block) from every member's src, in team order, and stores the result in the
      // root's dst: every member's blocks reduce, where the pull leaves all of it to the root's.
      const std::uint64_t entry = exchange_value(epoch, 0);
      publish_root_dst(comm, p.root, dst);
      team_exchange(comm, channel, entry,
                    kReduceEntryNames[static_cast<int>(ReduceKind::kReducePush)]);
      std::size_t shard, shard_end;
      shard_of<T>(p.count, comm.team.size, comm.index, shard, shard_end);
      const std::size_t at = shard + first;
      if (at < shard_end) {
        T* out = comm.ctx.translate(root_dst(comm, p.root, dst), comm.world_rank(p.root));
        reduce_span(comm, out + at, false, src + at, n < shard_end - at ? n : shard_end - at, p.op);
      }
      team_exchange(comm, channel, entry + 1, "ccl reduce(push) exit");
      break;
    }
  }
  device::end(comm, epoch);
}

/// One-shot push all_reduce (its own kernel: a small one, as the latency algorithms' are). Each
/// block writes its elements [first, first + n) of src into this rank's row of every other
/// member's staging (parity epoch % 2; workspace.hpp), meets the same block of every member
/// (which orders those writes before it), and reduces the elements in team order from its own
/// src and its rows. No exit meeting: a parity is written again two calls later, and each call
/// meets (or, in packets, hears from) every member, so by then every member has finished reading
/// it (docs/ccl.md has the argument).
template <class T>
__global__ void __launch_bounds__(kMaxThreads)
    all_reduce_push_kernel(const __grid_constant__ ReduceParams p) {
  const device::Communicator& comm = p.comm;
  const ReduceCall c = begin_reduce<T>(p);
  const T* src = static_cast<const T*>(p.src) + c.first;
  auto* parity = static_cast<std::byte*>(p.staging) +
                 (c.epoch & 1) * static_cast<std::size_t>(comm.team.size) * p.row;
  const std::size_t skew = reinterpret_cast<std::uintptr_t>(p.src) % 16;
  auto row = [&](int k) {
    return reinterpret_cast<T*>(parity + static_cast<std::size_t>(k) * p.row + skew) + c.first;
  };
  put_to_members(comm, row(comm.index), src, c.n);
  team_exchange(comm, static_cast<int>(blockIdx.x), exchange_value(c.epoch, 0),
                kReduceEntryNames[static_cast<int>(ReduceKind::kAllReducePush)]);
  reduce_span(
      comm, static_cast<T*>(p.dst) + c.first, false,
      [&](int k) -> const T* { return k == comm.index ? src : row(k); }, c.n, p.op);
  device::end(comm, c.epoch);
}

/// The payload of a packet read as its two halves (iris/device/packet.hpp), when both carry
/// `flag`.
IRIS_DEVICE_FN IRIS_FORCEINLINE bool unpack_packet(std::uint64_t lo, std::uint64_t hi,
                                                   std::uint32_t flag, std::uint64_t& payload) {
  if (static_cast<std::uint32_t>(lo >> 32) != flag || static_cast<std::uint32_t>(hi >> 32) != flag)
    return false;
  payload = (hi & 0xffffffffu) << 32 | (lo & 0xffffffffu);
  return true;
}

/// The slow path of a packet that had not arrived at the first read: the bounded wait, kept out
/// of line so that the unrolled fast path stays small (registers). A timeout's report names
/// `operation`, the team, the round (the call's epoch) and the member whose packet never came.
__noinline__ IRIS_DEVICE_FN std::uint64_t wait_packet(const device::Communicator& comm,
                                                      const iris::device::packet* slot,
                                                      std::uint32_t flag, int from,
                                                      const char* operation) {
  return iris::device::detail::packet_wait_as(comm.ctx, slot, flag, from,
                                              {.operation = operation,
                                               .team_start = comm.team.start,
                                               .team_size = comm.team.size,
                                               .team_stride = comm.team.stride});
}

// What a timed-out packet wait reports (the operation field holds at most 31 characters).
__device__ const char kOneShotWait[] = "ccl all_reduce (packets)";
__device__ const char kTwoShotWait[] = "ccl all_reduce (2-shot packets)";
__device__ const char kTwoShotReduceWait[] = "ccl all_reduce (2-shot reduce)";
__device__ const char kTwoShotGatherWait[] = "ccl all_reduce (2-shot gather)";
static_assert(sizeof(kTwoShotWait) <= 32 && sizeof(kTwoShotReduceWait) <= 32 &&
              sizeof(kTwoShotGatherWait) <= 32);

/// The word `i` of every member reduced in team order: this rank's own is own() (read when its
/// turn comes), member k's arrives in the packet at slot(k), which it then empties. Every
/// member's packet is read at once (up to kMembersInFlight loads in flight) and only those not
/// there yet are waited for, so the wait costs about one read's latency rather than one per
/// member.
template <class T, class Own, class Slot>
IRIS_DEVICE_FN IRIS_FORCEINLINE std::uint64_t reduce_packets(const device::Communicator& comm,
                                                             ReduceOp op, std::uint32_t flag,
                                                             Own own, Slot slot,
                                                             const char* operation) {
  constexpr int E = sizeof(T) <= 8 ? 8 / sizeof(T) : 1;
  const int members = comm.team.size;
  acc_t<T> acc[E];
  for (int k0 = 0; k0 < members; k0 += kMembersInFlight) {
    std::uint64_t lo[kMembersInFlight] = {}, hi[kMembersInFlight] = {};
#pragma unroll
    for (int j = 0; j < kMembersInFlight; ++j)
      if (k0 + j < members && k0 + j != comm.index)
        iris::device::detail::packet_load_raw(slot(k0 + j), lo[j], hi[j]);
#pragma unroll
    for (int j = 0; j < kMembersInFlight; ++j) {
      const int k = k0 + j;
      if (k >= members) break;
      std::uint64_t word;
      if (k == comm.index) {
        word = own();
      } else {
        if (!unpack_packet(lo[j], hi[j], flag, word))
          word = wait_packet(comm, slot(k), flag, comm.world_rank(k), operation);
        iris::device::packet_empty(slot(k));  // (PacketCall says why)
      }
      T e[E];
      memcpy(e, &word, sizeof(e));
#pragma unroll
      for (int x = 0; x < E; ++x)
        acc[x] = k == 0 ? widen<T>(e[x]) : combine(op, acc[x], widen<T>(e[x]));
    }
  }
  T out[E];
#pragma unroll
  for (int x = 0; x < E; ++x) out[x] = narrow<T>(finish(op, acc[x], members));
  std::uint64_t word;
  memcpy(&word, out, sizeof(word));
  return word;
}

/// What both all_reduces in packets start with: the call's epoch (its arguments checked across
/// the team under debug checks), this block's words [first, last) and the parity of the slots
/// the call uses.
///
/// Every packet a call writes is read in the same call, by the rank it was written to, and that
/// rank empties the slot (zeros) as it reads it; the slots start as zeros. So when a call begins,
/// every slot of its parity is empty, and a slot that carries the call's flag holds the call's
/// packet: no earlier call's packet can pass for it, however many calls ago it was written. The
/// flag needs only to be non-zero (so that an empty slot never passes); the epoch's low 32 bits
/// name the round in a timeout's report, and wrap from 2^32 - 1 to 1, never to 0. Emptying costs
/// the reader one 16-byte store to its own memory per packet. The store is safe where the next
/// packet in that slot is: a slot is written again two calls later, after its reader has finished
/// this call (the argument at the kernels below), so its emptying comes first.
struct PacketCall {
  std::uint64_t epoch;
  std::uint32_t flag;  ///< the flag every packet of the call carries (packet_flag)
  std::size_t bytes;
  std::size_t first;
  std::size_t last;
  iris::device::packet* parity;
};

template <class T>
IRIS_DEVICE_FN IRIS_FORCEINLINE PacketCall begin_packets(const PacketParams& p) {
  const device::Communicator& comm = p.comm;
  PacketCall c;
  c.epoch = device::begin(comm);
  c.flag = packet_flag(c.epoch);
  c.bytes = p.count * sizeof(T);
  const std::size_t packets = iris::device::packets_for(c.bytes);
  c.first = static_cast<std::size_t>(blockIdx.x) * p.tile_packets;
  c.last = c.first + p.tile_packets < packets ? c.first + p.tile_packets : packets;
  c.parity = reinterpret_cast<iris::device::packet*>(comm.workspace + kControlBytes) +
             (c.epoch & 1) * static_cast<std::size_t>(comm.team.size) * p.slots_per_sender;
  check_args(comm, c.epoch,
             {.code = kPacketCode + (p.two_shot ? 1u : 0u),
              .count = p.count,
              .count_name = "count",
              .type = type_code<T>(),
              .op = 1 + static_cast<std::uint32_t>(p.op),
              .root = 0,
              .in_place = p.dst == p.src,
              .name = "ccl all_reduce"},
             p.two_shot ? kTwoShotWait : kOneShotWait);
  return c;
}

/// One-shot all_reduce in packets. Every rank writes its input, as packets flagged with the
/// epoch, into its own slots on every other rank (parity epoch % 2), then reduces, in team
/// order, its own input with what the others' packets carry. No exchange of flags: the packets
/// are the flags (signals, not barriers: ccl/detail/sync.hpp). A thread owns packets i, i +
/// blockDim, ... and reduces each with reduce_packets. A rank reuses a parity's slots two calls
/// later, by which time every reader of them has finished (it must have sent its packets of the
/// call between, which it does only after its previous call ended).
template <class T>
__global__ void __launch_bounds__(kMaxThreads)
    all_reduce_packets_kernel(const __grid_constant__ PacketParams p) {
  const device::Communicator& comm = p.comm;
  const auto& ctx = comm.ctx;
  const PacketCall c = begin_packets<T>(p);
  const std::uint32_t flag = c.flag;
  const std::size_t bytes = c.bytes;
  iris::device::packet* const parity = c.parity;
  const int members = comm.team.size;
  auto region = [&](int sender) {
    return parity + static_cast<std::size_t>(sender) * p.slots_per_sender;
  };
  const auto* src = static_cast<const std::byte*>(p.src);
  auto* dst = static_cast<std::byte*>(p.dst);
  for (std::size_t i = c.first + threadIdx.x; i < c.last; i += blockDim.x) {
    const std::uint64_t word = iris::device::detail::gather_word(src, i * 8, bytes);
    for (int j = 1; j < members; ++j) {
      const int k = (comm.index + j) % members;
      iris::device::packet_put(ctx, region(comm.index) + i, word, flag, comm.world_rank(k));
    }
  }
  for (std::size_t i = c.first + threadIdx.x; i < c.last; i += blockDim.x) {
    const std::uint64_t word = reduce_packets<T>(
        comm, p.op, flag, [&] { return iris::device::detail::gather_word(src, i * 8, bytes); },
        [&](int k) { return region(k) + i; }, kOneShotWait);
    iris::device::detail::scatter_word(dst, i * 8, bytes, word);
  }
  device::end(comm, c.epoch);
}

/// Two-shot all_reduce in packets: a reduce-scatter then an all-gather, both in packets, so
/// that a rank stores 2 (n - 1) / n of its message in packets instead of the one-shot's n - 1
/// times, for one more hop. The words are dealt out in chunks (workspace.hpp, two_shot_owner):
///   1. every member sends each word it does not own to the word's owner (contribution slots);
///   2. the owner reduces each of its words in team order (reduce_packets), writes the result
///      to its output and sends it to every other member (result slots);
///   3. every member waits for the results of the words it does not own and writes them out.
/// In place is safe: each word is read and written out by one thread (phases 1 and 3 take the
/// words i, i + blockDim, ...; phase 2 deals the owned words out afresh). No phase waits for
/// anything but packets of the phase before, which the members send first: so no flag round
/// trip and no barrier. The slots' reuse is the one-shot's argument, through member 0
/// (workspace.hpp).
template <class T>
__global__ void __launch_bounds__(kMaxThreads)
    all_reduce_packets_two_shot_kernel(const __grid_constant__ PacketParams p) {
  const device::Communicator& comm = p.comm;
  const auto& ctx = comm.ctx;
  const PacketCall c = begin_packets<T>(p);
  const std::uint32_t flag = c.flag;
  const std::size_t bytes = c.bytes;
  iris::device::packet* const results = c.parity;
  const int members = comm.team.size;
  const int me = comm.index;
  auto contributions = [&](int sender) {
    return results + p.results_slots + static_cast<std::size_t>(sender) * p.contribution_slots;
  };
  auto owner = [&](std::size_t i) { return two_shot_owner(i, p.chunk_words, members); };
  auto slot = [&](std::size_t i) { return two_shot_slot(i, p.chunk_words, members); };
  const auto* src = static_cast<const std::byte*>(p.src);
  auto* dst = static_cast<std::byte*>(p.dst);
  for (std::size_t i = c.first + threadIdx.x; i < c.last; i += blockDim.x) {
    const int o = owner(i);
    if (o != me)
      iris::device::packet_put(ctx, contributions(me) + slot(i),
                               iris::device::detail::gather_word(src, i * 8, bytes), flag,
                               comm.world_rank(o));
  }
  // This member's words in [first, last) are every n-th chunk: thread t takes the t-th, t +
  // blockDim-th, ... of them, so the whole block reduces. (In the other phases' order, a warp's
  // words with 32-word chunks all have one owner: one warp in n would do this phase alone.)
  const std::size_t cw = p.chunk_words;
  const std::size_t q0 =
      c.first / cw + (me - two_shot_owner(c.first, cw, members) + members) % members;
  for (std::size_t j = threadIdx.x;; j += blockDim.x) {
    const std::size_t i = (q0 + j / cw * members) * cw + j % cw;
    if (i >= c.last) break;
    if (i < c.first) continue;  // the first chunk may start before this block's words
    const std::size_t s = slot(i);
    const std::uint64_t word = reduce_packets<T>(
        comm, p.op, flag, [&] { return iris::device::detail::gather_word(src, i * 8, bytes); },
        [&](int k) { return contributions(k) + s; }, kTwoShotReduceWait);
    for (int j = 1; j < members; ++j)
      iris::device::packet_put(ctx, results + i, word, flag, comm.world_rank((me + j) % members));
    iris::device::detail::scatter_word(dst, i * 8, bytes, word);
  }
  for (std::size_t i = c.first + threadIdx.x; i < c.last; i += blockDim.x) {
    const int o = owner(i);
    if (o == me) continue;
    std::uint64_t lo, hi, word;
    iris::device::detail::packet_load_raw(results + i, lo, hi);
    if (!unpack_packet(lo, hi, flag, word))
      word = wait_packet(comm, results + i, flag, comm.world_rank(o), kTwoShotGatherWait);
    iris::device::packet_empty(results + i);
    iris::device::detail::scatter_word(dst, i * 8, bytes, word);
  }
  device::end(comm, c.epoch);
}

template <class F>
void with_type(DataType type, F&& f) {
  switch (type) {
    case DataType::kFloat32:
      return f(float{});
    case DataType::kFloat16:
      return f(__half{});
    case DataType::kBFloat16:
      return f(__nv_bfloat16{});
    case DataType::kInt32:
      return f(std::int32_t{});
    case DataType::kInt64:
      return f(std::int64_t{});
    case DataType::kUInt8:
      return f(std::uint8_t{});
  }
  throw Error(Errc::kInvalidArgument, "iris::ccl: unknown data type");
}

}  // namespace

void launch_reduce(const ReduceParams& params, DataType type, int blocks, int threads,
                   cudaStream_t stream) {
  with_type(type, [&](auto t) {
    using T = decltype(t);
    if (params.kind == ReduceKind::kAllReducePush)
      all_reduce_push_kernel<T><<<blocks, threads, 0, stream>>>(params);
    else
      reduce_kernel<T><<<blocks, threads, 0, stream>>>(params);
  });
  IRIS_CUDA_CHECK(cudaGetLastError());
}

void launch_all_reduce_packets(const PacketParams& params, DataType type, int blocks, int threads,
                               cudaStream_t stream) {
  with_type(type, [&](auto t) {
    using T = decltype(t);
    if (params.two_shot)
      all_reduce_packets_two_shot_kernel<T><<<blocks, threads, 0, stream>>>(params);
    else
      all_reduce_packets_kernel<T><<<blocks, threads, 0, stream>>>(params);
  });
  IRIS_CUDA_CHECK(cudaGetLastError());
}

int resident_reduce_blocks(int threads) {
  int fewest = 1 << 30;
  auto count = [&](const void* kernel) {
    int n = 0;
    IRIS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, 0));
    fewest = std::min(fewest, n);
  };
  for (DataType type : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                        DataType::kInt32, DataType::kInt64, DataType::kUInt8}) {
    with_type(type, [&](auto t) {
      count(reinterpret_cast<const void*>(&reduce_kernel<decltype(t)>));
      count(reinterpret_cast<const void*>(&all_reduce_push_kernel<decltype(t)>));
      count(reinterpret_cast<const void*>(&all_reduce_packets_kernel<decltype(t)>));
      count(reinterpret_cast<const void*>(&all_reduce_packets_two_shot_kernel<decltype(t)>));
    });
  }
  return fewest;
}

}  // namespace iris::ccl::detail
