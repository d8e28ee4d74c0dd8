// The reducing collectives' kernels: all_reduce (one-shot packets, one-shot pull, two-shot),
// reduce_scatter (pull, ring) and reduce. One kernel per element type; the operator is chosen at
// run time.
#include <algorithm>

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
                                               "ccl reduce_scatter", "ccl reduce",
                                               "ccl reduce_scatter"};
__device__ const char* const kReduceEntryNames[] = {
    "ccl all_reduce (entry)", "ccl all_reduce (entry)", "ccl reduce_scatter (entry)",
    "ccl reduce (entry)", "ccl reduce_scatter(ring) entry"};
// clang-format on

template <class T>
__global__ void __launch_bounds__(kMaxThreads)
    reduce_kernel(const __grid_constant__ ReduceParams p) {
  const device::Communicator& comm = p.comm;
  const std::uint64_t epoch = device::begin(comm);
  const int channel = static_cast<int>(blockIdx.x);
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * p.tile;
  const std::size_t last = first + p.tile < p.count ? first + p.tile : p.count;
  const std::size_t n = last > first ? last - first : 0;
  T* dst = static_cast<T*>(p.dst);
  const T* src = static_cast<const T*>(p.src);
  const auto kind = static_cast<int>(p.kind);
  // In place as each call defines it (reduce: the root's dst only matters, so not compared).
  const bool scatter =
      p.kind == ReduceKind::kReduceScatter || p.kind == ReduceKind::kReduceScatterRing;
  const bool in_place =
      scatter ? dst == src + static_cast<std::size_t>(comm.index) * p.count
              : (p.kind != ReduceKind::kReduce && static_cast<const void*>(dst) == src);
  check_args(comm, epoch,
             {.code = kReduceCodes + static_cast<std::uint32_t>(kind),
              .count = p.count,
              .count_name = "count",
              .type = type_code<T>(),
              .op = 1 + static_cast<std::uint32_t>(p.op),
              .root = p.kind == ReduceKind::kReduce ? static_cast<std::uint32_t>(p.root) : 0u,
              .in_place = in_place,
              .name = kReduceNames[kind]},
             kReduceEntryNames[kind]);
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
  }
  device::end(comm, epoch);
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
/// of line so that the unrolled fast path stays small (registers).
__noinline__ IRIS_DEVICE_FN std::uint64_t wait_packet(const iris::device::Context& ctx,
                                                      const iris::device::packet* slot,
                                                      std::uint32_t flag, int from) {
  return iris::device::packet_wait(ctx, slot, flag, from);
}

/// One-shot all_reduce in packets. Every rank writes its input, as packets flagged with the
/// epoch, into its own slots on every other rank (parity epoch % 2), then reduces, in team
/// order, its own input with what the others' packets carry. No exchange of flags: the packets
/// are the flags (signals, not barriers: ccl/detail/sync.hpp). A thread owns packets i, i +
/// blockDim, ...: for each it reads every member's packet at once (up to kMembersInFlight
/// loads in flight) and waits only for those not there yet, so the wait costs about one read's
/// latency rather than one per member. A rank reuses a parity's slots two calls later, by which
/// time every reader of them has finished (it must have sent its packets of the call between, which
/// it does only after its previous call ended).
template <class T>
__global__ void __launch_bounds__(kMaxThreads)
    all_reduce_packets_kernel(const __grid_constant__ PacketParams p) {
  using iris::device::packet;
  const device::Communicator& comm = p.comm;
  const auto& ctx = comm.ctx;
  const std::uint64_t epoch = device::begin(comm);
  const auto flag = static_cast<std::uint32_t>(epoch);
  const int parity = static_cast<int>(epoch & 1);
  const int members = comm.team.size;
  const std::size_t bytes = p.count * sizeof(T);
  const std::size_t packets = iris::device::packets_for(bytes);
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * p.tile_packets;
  const std::size_t last = first + p.tile_packets < packets ? first + p.tile_packets : packets;
  auto* slots = reinterpret_cast<packet*>(comm.workspace + kControlBytes);
  auto region = [&](int sender) {
    return slots + (static_cast<std::size_t>(parity) * members + sender) * p.slots_per_sender;
  };
  const auto* src = static_cast<const std::byte*>(p.src);
  auto* dst = static_cast<std::byte*>(p.dst);
  check_args(comm, epoch,
             {.code = kPacketCode,
              .count = p.count,
              .count_name = "count",
              .type = type_code<T>(),
              .op = 1 + static_cast<std::uint32_t>(p.op),
              .root = 0,
              .in_place = p.dst == p.src,
              .name = "ccl all_reduce"},
             "ccl all_reduce (packets)");
  for (std::size_t i = first + threadIdx.x; i < last; i += blockDim.x) {
    const std::uint64_t word = iris::device::detail::gather_word(src, i * 8, bytes);
    for (int j = 1; j < members; ++j) {
      const int k = (comm.index + j) % members;
      iris::device::packet_put(ctx, region(comm.index) + i, word, flag, comm.world_rank(k));
    }
  }
  constexpr int E = sizeof(T) <= 8 ? 8 / sizeof(T) : 1;
  for (std::size_t i = first + threadIdx.x; i < last; i += blockDim.x) {
    acc_t<T> acc[E];
    for (int k0 = 0; k0 < members; k0 += kMembersInFlight) {
      // One read of every member's packet first, all in flight at once; only the packets that
      // had not arrived yet are waited for, one by one. The reduction stays in team order.
      std::uint64_t lo[kMembersInFlight] = {}, hi[kMembersInFlight] = {};
#pragma unroll
      for (int j = 0; j < kMembersInFlight; ++j)
        if (k0 + j < members && k0 + j != comm.index)
          iris::device::detail::packet_load_raw(region(k0 + j) + i, lo[j], hi[j]);
#pragma unroll
      for (int j = 0; j < kMembersInFlight; ++j) {
        const int k = k0 + j;
        if (k >= members) break;
        std::uint64_t word;
        if (k == comm.index) {
          word = iris::device::detail::gather_word(src, i * 8, bytes);
        } else if (!unpack_packet(lo[j], hi[j], flag, word)) {
          word = wait_packet(ctx, region(k) + i, flag, comm.world_rank(k));
        }
        T e[E];
        memcpy(e, &word, sizeof(e));
#pragma unroll
        for (int x = 0; x < E; ++x)
          acc[x] = k == 0 ? widen<T>(e[x]) : combine(p.op, acc[x], widen<T>(e[x]));
      }
    }
    T out[E];
#pragma unroll
    for (int x = 0; x < E; ++x) out[x] = narrow<T>(finish(p.op, acc[x], members));
    std::uint64_t word;
    memcpy(&word, out, sizeof(word));
    iris::device::detail::scatter_word(dst, i * 8, bytes, word);
  }
  device::end(comm, epoch);
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
  with_type(type,
            [&](auto t) { reduce_kernel<decltype(t)><<<blocks, threads, 0, stream>>>(params); });
  IRIS_CUDA_CHECK(cudaGetLastError());
}

void launch_all_reduce_packets(const PacketParams& params, DataType type, int blocks, int threads,
                               cudaStream_t stream) {
  with_type(type, [&](auto t) {
    all_reduce_packets_kernel<decltype(t)><<<blocks, threads, 0, stream>>>(params);
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
      count(reinterpret_cast<const void*>(&all_reduce_packets_kernel<decltype(t)>));
    });
  }
  return fewest;
}

}  // namespace iris::ccl::detail
