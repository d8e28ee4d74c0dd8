// RMA bandwidth against size: how fast rank 0 moves data to rank 1 (put, copy, store) or pulls it
// from rank 1 (get, load), at every cooperation level, next to cudaMemcpy, cudaMemcpyPeer and a
// plain 16-byte copy kernel measured in the same run.
//
//   iris-run -n 2 ./bench_rma_bandwidth [--max-mib 1024] [--samples 21] [--json out.json]
//
// GB/s = payload bytes / time (1 GB = 1e9 bytes): moving N bytes counts N, as NVLink and NCCL
// figures do. Each call is checked once (every byte arrived, nothing past the end was written)
// before it is timed; a wrong one prints "WRONG:" and the program exits 1 after its tables and
// JSON. Rank 0 works; the other ranks only keep their memory mapped and meet it at
// ctx.barrier() between measurements. Sizes below the L2 cache rotate through the whole buffer,
// so that repeated calls read HBM, not L2.
//
// The ratios are taken against a reference timed in turn with each row. Ranks 0 and 1 on
// different GPUs that can reach each other: cudaMemcpyPeerAsync between plain cudaMalloc buffers
// on the two GPUs (peer access enabled both ways), a copy that surely runs; the same copy on the
// heap's buffers ("cudaMemcpyPeer (heap)") may be refused, since the heap maps its memory for its
// own GPU only. GPUs that cannot reach each other: cudaMemcpy D2D within rank 0's GPU, and the
// output says so. Both ranks on one GPU: cudaMemcpy D2D (the plain peer copy is then a D2D copy
// too). On different GPUs a table of each row's fraction of 450 GB/s, NVLink 4's rate per
// direction on an H100/H200, follows.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "iris/iris.hpp"
#include "report.hpp"

namespace {

constexpr int kThreadsPerBlock = 256;
constexpr int kVectorBytes = 16;  // one 128-bit access
constexpr std::size_t kFloatsPerVector = kVectorBytes / sizeof(float);
/// 16-byte vectors each thread moves per call. Two, with the four or five blocks per SM that the
/// put kernels' registers allow, keep enough reads in flight per SM to cover the memory latency;
/// one per thread is too few, and four leave fewer blocks per SM (docs/benchmarks.md has the
/// measured figures; benchmarks/studies/put_tiles sweeps the choice).
constexpr std::size_t kVectorsPerThread = 2;

// ---- kernels ---------------------------------------------------------------------------------

/// The calling group's index among the grid's groups of type G, and how many there are.
struct GroupSlot {
  std::size_t index;
  std::size_t count;
};

template <class G>
__device__ GroupSlot group_slot() {
  const std::size_t thread = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  const std::size_t threads = std::size_t{gridDim.x} * blockDim.x;
  if constexpr (std::is_same_v<G, iris::thread>) return {thread, threads};
  if constexpr (std::is_same_v<G, iris::warp>) return {thread / 32, threads / 32};
  if constexpr (std::is_same_v<G, iris::block>) return {blockIdx.x, gridDim.x};
  return {0, 1};  // iris::grid: the whole grid is one group
}

/// Elements one call of put/get/copy moves per group member.
constexpr std::size_t kElementsPerMember = kVectorsPerThread * kFloatsPerVector;

enum class Op { kPut, kGet, kCopy };

/// Rank 0's side of put/get/copy: the grid's groups take tiles of the range in turn, one device
/// API call per tile (iris::grid: one call for the whole range). put and copy write `dst` on
/// `peer` from local `src`; get reads `src` on `peer` into local `dst`. With a grid of one pass
/// (a group per tile) the loop runs once: that is the fastest shape for bulk moves, faster than a
/// persistent grid looping over the tiles (docs/benchmarks.md; benchmarks/studies/put_tiles).
template <Op kOp, class G>
__global__ void __launch_bounds__(kThreadsPerBlock)
    move_tiles(const __grid_constant__ iris::device::Context ctx, float* dst, const float* src,
               std::size_t count, int peer) {
  const G group{};
  const GroupSlot slot = group_slot<G>();
  const std::size_t tile =
      std::is_same_v<G, iris::grid> ? count : std::size_t{G::num_threads()} * kElementsPerMember;
  for (std::size_t start = slot.index * tile; start < count; start += slot.count * tile) {
    const std::size_t n = std::min(tile, count - start);
    if constexpr (kOp == Op::kPut) iris::device::put(group, ctx, dst + start, src + start, n, peer);
    if constexpr (kOp == Op::kGet) iris::device::get(group, ctx, dst + start, src + start, n, peer);
    if constexpr (kOp == Op::kCopy)
      iris::device::copy(group, ctx, dst + start, src + start, n, peer, ctx.rank());
  }
}

/// What a kernel written with the register-level API does: the group loads kVectorsPerThread
/// tiles of rank `from`'s `src` into registers (one 16-byte vector per member and tile), then
/// stores them to rank `to`'s `dst`. "load" is from = peer, to = self; "store" is from = self,
/// to = peer.
template <class G>
__global__ void __launch_bounds__(kThreadsPerBlock)
    move_through_registers(const __grid_constant__ iris::device::Context ctx, float* dst,
                           const float* src, std::size_t count, int from, int to) {
  const G group{};
  const GroupSlot slot = group_slot<G>();
  const std::size_t tile = std::size_t{G::num_threads()} * kFloatsPerVector;
  constexpr int kTilesInFlight = kVectorsPerThread;
  for (std::size_t first = slot.index; first * tile < count; first += kTilesInFlight * slot.count) {
    cuda::std::array<float, kFloatsPerVector> values[kTilesInFlight];
#pragma unroll
    for (int k = 0; k < kTilesInFlight; ++k) {
      const std::size_t start = (first + k * slot.count) * tile;
      if (start < count)
        values[k] =
            iris::device::load<kFloatsPerVector>(group, ctx, src + start, count - start, from);
    }
#pragma unroll
    for (int k = 0; k < kTilesInFlight; ++k) {
      const std::size_t start = (first + k * slot.count) * tile;
      if (start < count) iris::device::store(group, ctx, dst + start, values[k], count - start, to);
    }
  }
}

/// The baseline every GPU programmer writes first: one 16-byte vector per thread per step.
__global__ void __launch_bounds__(kThreadsPerBlock)
    plain_copy(uint4* dst, const uint4* src, std::size_t vectors) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < vectors;
       i += std::size_t{gridDim.x} * blockDim.x)
    dst[i] = src[i];
}

// ---- the variants ----------------------------------------------------------------------------

/// One way of moving `bytes` bytes from rank src_rank's `src` to rank dst_rank's `dst`, starting
/// `offset` floats into both buffers, with `blocks` blocks (ignored by the cudaMemcpy rows).
struct Variant {
  std::string op;
  std::string coop;
  int src_rank;
  int dst_rank;
  const void* kernel;              // for the occupancy query; null for the driver's baselines
  std::size_t vectors_per_thread;  // in one pass over the range
  std::function<void(std::size_t bytes, std::size_t offset, int blocks, cudaStream_t)> enqueue;
  // Where the check reads what arrived and what was sent, when not the heap buffers of dst_rank
  // and src_rank (the reference's own cudaMalloc buffers).
  float* check_dst = nullptr;
  const float* check_src = nullptr;
  int check_dst_device = -1;  // check_dst's GPU, where it is poisoned
};

template <Op kOp, class G>
Variant tile_variant(const iris::Context& ctx, const std::string& op, const std::string& coop,
                     float* dst, const float* src, int peer) {
  const iris::device::Context device = ctx.device();
  const bool get = kOp == Op::kGet;
  const int self = ctx.rank();
  return {op,
          coop,
          get ? peer : self,
          get ? self : peer,
          reinterpret_cast<const void*>(&move_tiles<kOp, G>),
          kVectorsPerThread,
          [=](std::size_t bytes, std::size_t offset, int blocks, cudaStream_t stream) {
            move_tiles<kOp, G><<<blocks, kThreadsPerBlock, 0, stream>>>(
                device, dst + offset, src + offset, bytes / sizeof(float), peer);
          }};
}

template <class G>
Variant register_variant(const iris::Context& ctx, const std::string& op, const std::string& coop,
                         float* dst, const float* src, int from, int to) {
  const iris::device::Context device = ctx.device();
  return {op,
          coop,
          from,
          to,
          reinterpret_cast<const void*>(&move_through_registers<G>),
          kVectorsPerThread,
          [=](std::size_t bytes, std::size_t offset, int blocks, cudaStream_t stream) {
            move_through_registers<G><<<blocks, kThreadsPerBlock, 0, stream>>>(
                device, dst + offset, src + offset, bytes / sizeof(float), from, to);
          }};
}

/// The baseline the ratios are taken against when the ranks share a GPU, or when their GPUs
/// cannot reach each other.
constexpr const char* kMemcpyName = "cudaMemcpy D2D (local)";
/// The reference between two GPUs: cudaMemcpyPeerAsync between plain cudaMalloc buffers.
constexpr const char* kPlainPeerName = "cudaMemcpyPeer (cudaMalloc)";
/// The NVLink 4 rate per direction of one H100/H200 in an 8-GPU board (18 links x 25 GB/s).
constexpr double kLinkGBps = 450;

/// The reference's own buffers, on rank 0 only: `floats` floats on rank 0's GPU (filled from the
/// heap source, so that the check has something to compare) and as many, plus a guard band, on
/// the peer's GPU when the two GPUs can reach each other (peer access is then enabled both
/// ways), else on rank 0's GPU. `how` says which, in words for the output.
class PlainBuffers {
 public:
  PlainBuffers(const iris::Context& ctx, const float* heap_src, std::size_t floats,
               const std::vector<int>& devices, int peer) {
    if (ctx.rank() != 0) return;
    const int self = devices[ctx.rank()], peer_device = devices[peer];
    src_device = dst_device = self;
    if (peer_device < 0) {
      how =
          "rank 0's process cannot see rank 1's GPU: no peer copy, the ratios are to "
          "cudaMemcpy D2D within rank 0's GPU, not a link figure";
      name = "cudaMemcpy D2D (cudaMalloc, no peer path)";
    } else if (peer_device == self) {
      how = "ranks 0 and 1 share one GPU: the cudaMalloc peer copy is a D2D copy within it";
      name = "cudaMemcpyPeer (cudaMalloc, one GPU: D2D)";
      reaches = true;
    } else {
      int there = 0, back = 0;
      IRIS_CUDA_CHECK(cudaDeviceCanAccessPeer(&there, self, peer_device));
      IRIS_CUDA_CHECK(cudaDeviceCanAccessPeer(&back, peer_device, self));
      if (there && back) {
        iris::bench::enable_peer_access(self, peer_device);
        iris::bench::enable_peer_access(peer_device, self);
        dst_device = peer_device;
        reaches = true;
        how = "cudaMemcpyPeerAsync between cudaMalloc buffers on GPU " + std::to_string(self) +
              " and GPU " + std::to_string(peer_device) + " (peer access enabled both ways)";
      } else {
        how = "GPUs " + std::to_string(self) + " and " + std::to_string(peer_device) +
              " cannot reach each other (cudaDeviceCanAccessPeer 0): the ratios are to "
              "cudaMemcpy D2D within rank 0's GPU, not a link figure";
        name = "cudaMemcpy D2D (cudaMalloc, no peer path)";
      }
    }
    const std::size_t bytes = floats * sizeof(float);
    IRIS_CUDA_CHECK(cudaSetDevice(dst_device));
    IRIS_CUDA_CHECK(cudaMalloc(&dst, bytes + kGuardBytes));
    IRIS_CUDA_CHECK(cudaSetDevice(src_device));
    IRIS_CUDA_CHECK(cudaMalloc(&src, bytes));
    IRIS_CUDA_CHECK(cudaMemcpy(src, heap_src, bytes, cudaMemcpyDeviceToDevice));
  }
  ~PlainBuffers() {
    if (dst != nullptr) {
      (void)cudaSetDevice(dst_device);
      cudaFree(dst);
    }
    (void)cudaSetDevice(src_device);
    if (src != nullptr) cudaFree(src);
  }
  PlainBuffers(const PlainBuffers&) = delete;
  PlainBuffers& operator=(const PlainBuffers&) = delete;

  static constexpr std::size_t kGuardBytes = 4096;  // the check's guard band past the end
  float* src = nullptr;
  float* dst = nullptr;
  int src_device = 0, dst_device = 0;
  bool reaches = false;  ///< a peer copy between the ranks' GPUs (or within their one GPU)
  std::string how;
  std::string name = kPlainPeerName;  ///< the row's name: what the copy is here
};

std::vector<Variant> make_variants(const iris::Context& ctx, iris::Buffer<float>& dst,
                                   iris::Buffer<float>& src, int peer,
                                   const std::vector<int>& devices, const PlainBuffers& plain) {
  float* d = dst.data();
  const float* s = src.data();
  std::vector<Variant> variants;
  variants.push_back(tile_variant<Op::kPut, iris::thread>(ctx, "put", "thread", d, s, peer));
  variants.push_back(tile_variant<Op::kPut, iris::warp>(ctx, "put", "warp", d, s, peer));
  variants.push_back(tile_variant<Op::kPut, iris::block>(ctx, "put", "block", d, s, peer));
  variants.push_back(tile_variant<Op::kPut, iris::grid>(ctx, "put", "grid", d, s, peer));
  variants.push_back(tile_variant<Op::kGet, iris::thread>(ctx, "get", "thread", d, s, peer));
  variants.push_back(tile_variant<Op::kGet, iris::warp>(ctx, "get", "warp", d, s, peer));
  variants.push_back(tile_variant<Op::kGet, iris::block>(ctx, "get", "block", d, s, peer));
  variants.push_back(tile_variant<Op::kGet, iris::grid>(ctx, "get", "grid", d, s, peer));
  variants.push_back(tile_variant<Op::kCopy, iris::thread>(ctx, "copy", "thread", d, s, peer));
  variants.push_back(tile_variant<Op::kCopy, iris::warp>(ctx, "copy", "warp", d, s, peer));
  variants.push_back(tile_variant<Op::kCopy, iris::block>(ctx, "copy", "block", d, s, peer));
  variants.push_back(tile_variant<Op::kCopy, iris::grid>(ctx, "copy", "grid", d, s, peer));
  const int self = ctx.rank();
  variants.push_back(register_variant<iris::thread>(ctx, "load", "thread", d, s, peer, self));
  variants.push_back(register_variant<iris::warp>(ctx, "load", "warp", d, s, peer, self));
  variants.push_back(register_variant<iris::block>(ctx, "load", "block", d, s, peer, self));
  variants.push_back(register_variant<iris::thread>(ctx, "store", "thread", d, s, self, peer));
  variants.push_back(register_variant<iris::warp>(ctx, "store", "warp", d, s, self, peer));
  variants.push_back(register_variant<iris::block>(ctx, "store", "block", d, s, self, peer));

  // Baselines, same direction and memory as put.
  float* peer_dst = dst.on(peer);
  variants.push_back({"plain 16-byte kernel", "-", self, peer,
                      reinterpret_cast<const void*>(&plain_copy), 1,
                      [=](std::size_t bytes, std::size_t offset, int blocks, cudaStream_t stream) {
                        plain_copy<<<blocks, kThreadsPerBlock, 0, stream>>>(
                            reinterpret_cast<uint4*>(peer_dst + offset),
                            reinterpret_cast<const uint4*>(s + offset), bytes / kVectorBytes);
                      }});
  const int self_device = devices[self], peer_device = devices[peer];
  // The driver's peer copy on the heap's buffers: the heap maps them for its own GPU only, so the
  // driver may refuse it (then its row reads n/a).
  if (peer_device >= 0) {
    variants.push_back({"cudaMemcpyPeer (heap)", "-", self, peer, nullptr, 0,
                        [=](std::size_t bytes, std::size_t offset, int, cudaStream_t stream) {
                          IRIS_CUDA_CHECK(cudaMemcpyPeerAsync(peer_dst + offset, peer_device,
                                                              s + offset, self_device, bytes,
                                                              stream));
                        }});
  }
  // The reference between GPUs: the same copy between plain cudaMalloc buffers (on every rank,
  // so that all ranks step through the same variants; only rank 0 enqueues it). Its
  // destination is on rank 0's GPU when the GPUs cannot reach each other.
  {
    float* plain_dst = plain.dst;
    const float* plain_src = plain.src;
    const int plain_src_device = plain.src_device, plain_dst_device = plain.dst_device;
    Variant reference{
        plain.name,
        "-",
        self,
        plain.reaches ? peer : self,
        nullptr,
        0,
        [=](std::size_t bytes, std::size_t offset, int, cudaStream_t stream) {
          IRIS_CUDA_CHECK(cudaMemcpyPeerAsync(plain_dst + offset, plain_dst_device,
                                              plain_src + offset, plain_src_device, bytes, stream));
        }};
    reference.check_dst = plain.dst;
    reference.check_src = plain.src;
    reference.check_dst_device = plain.dst_device;
    variants.push_back(reference);
  }
  // A local device-to-device copy on rank 0's GPU: the HBM ceiling.
  variants.push_back({kMemcpyName, "-", self, self, nullptr, 0,
                      [=](std::size_t bytes, std::size_t offset, int, cudaStream_t stream) {
                        IRIS_CUDA_CHECK(cudaMemcpyAsync(d + offset, s + offset, bytes,
                                                        cudaMemcpyDeviceToDevice, stream));
                      }});
  return variants;
}

// ---- measuring -------------------------------------------------------------------------------

/// The grids the sweep tries. First the one-pass grid: a block for every kThreadsPerBlock x
/// vectors_per_thread vectors, each thread moving its vectors once. Then persistent grids of
/// 1 to 8 blocks per SM (up to the kernel's occupancy), every block resident and looping over
/// the range, as a kernel that also computes would be.
constexpr const char* kOnePass = "1 pass";
constexpr int kBlocksPerSmCandidates[] = {1, 2, 4, 8};

std::vector<std::string> grid_labels() {
  std::vector<std::string> labels{kOnePass};
  for (const int per_sm : kBlocksPerSmCandidates) labels.push_back(std::to_string(per_sm) + "/SM");
  return labels;
}

struct Measurement {
  bool ran = false;  // false: the call failed (see the message printed then)
  double gbps = 0;
  double ratio = 0;  // to the reference, timed in turn with it (Bench::paired_ratio)
  double ms = 0;
  int blocks = 0;
  std::string grid;                            // the best grid's label
  std::map<std::string, double> gbps_by_grid;  // the sweep
};

class Bench {
 public:
  Bench(iris::Buffer<float>& dst, iris::Buffer<float>& src, int samples)
      : dst_(dst), src_(src), samples_(samples), sms_(example::sm_count()) {
    IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    IRIS_CUDA_CHECK(cudaMalloc(&wrong_, sizeof(unsigned long long)));
  }
  ~Bench() {
    cudaFree(wrong_);
    cudaStreamDestroy(stream_);
  }
  int sms() const { return sms_; }

  /// Moves `bytes` once into a poisoned destination and counts the 4-byte words that are wrong,
  /// including a guard band past the end that must stay poisoned.
  unsigned long long check(const Variant& v, std::size_t bytes, int blocks) {
    const std::size_t guard_bytes = std::min<std::size_t>(4096, dst_.bytes() - bytes);
    float* dst = v.check_dst != nullptr ? v.check_dst : dst_.on(v.dst_rank);
    const float* want = v.check_src != nullptr ? v.check_src : src_.on(v.src_rank);
    constexpr unsigned char kPoison = 0xff;  // every float of it is a NaN: no source value
    if (v.check_dst_device >= 0) {
      // A plain buffer, maybe on the peer's GPU: poisoned there, before the call.
      int self = 0;
      IRIS_CUDA_CHECK(cudaGetDevice(&self));
      IRIS_CUDA_CHECK(cudaStreamSynchronize(stream_));
      IRIS_CUDA_CHECK(cudaSetDevice(v.check_dst_device));
      IRIS_CUDA_CHECK(cudaMemset(dst, kPoison, bytes + guard_bytes));
      IRIS_CUDA_CHECK(cudaDeviceSynchronize());
      IRIS_CUDA_CHECK(cudaSetDevice(self));
    } else {
      IRIS_CUDA_CHECK(cudaMemsetAsync(dst, kPoison, bytes + guard_bytes, stream_));
    }
    v.enqueue(bytes, 0, blocks, stream_);
    IRIS_CUDA_CHECK(cudaGetLastError());
    IRIS_CUDA_CHECK(cudaMemsetAsync(wrong_, 0, sizeof(unsigned long long), stream_));
    iris::bench::count_mismatches<<<2 * sms_, 256, 0, stream_>>>(
        reinterpret_cast<const unsigned*>(dst), reinterpret_cast<const unsigned*>(want),
        bytes / sizeof(unsigned), guard_bytes / sizeof(unsigned), ~0u, wrong_);
    IRIS_CUDA_CHECK(cudaGetLastError());
    unsigned long long wrong = 0;
    IRIS_CUDA_CHECK(
        cudaMemcpyAsync(&wrong, wrong_, sizeof(wrong), cudaMemcpyDeviceToHost, stream_));
    IRIS_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return wrong;
  }

  /// Milliseconds per call with `blocks` blocks, one value per sample. Calls rotate through the
  /// buffers, carrying on where the previous timing stopped, so that no call finds its data in L2.
  std::vector<double> time(const Variant& v, std::size_t bytes, int blocks, int samples) {
    const std::size_t slots = std::max<std::size_t>(1, dst_.bytes() / bytes);
    example::Repeats repeats;
    repeats.samples = samples;
    // Small calls are batched so that a sample lasts well above an event's resolution.
    repeats.calls_per_sample =
        static_cast<int>(std::clamp<std::size_t>((256u << 20) / bytes, 1, 100));
    return example::time_calls_ms(stream_, repeats, [&](long) {
      v.enqueue(bytes, calls_made_++ % slots * (bytes / sizeof(float)), blocks, stream_);
    });
  }
  double median_ms(const Variant& v, std::size_t bytes, int blocks) {
    return example::summarize(time(v, bytes, blocks, samples_)).median;
  }

  /// The median over samples of reference time / variant time, the two timed in turn: clock and
  /// temperature drift during the run fall on both alike, so the ratio is steadier than one of
  /// two medians taken minutes apart.
  double paired_ratio(const Variant& v, int blocks, const Variant& reference, std::size_t bytes) {
    std::vector<double> ratios;
    for (int s = 0; s < samples_; ++s) {
      const double reference_ms = time(reference, bytes, 0, 1).front();
      ratios.push_back(reference_ms / time(v, bytes, blocks, 1).front());
    }
    return example::summarize(ratios).median;
  }

  /// The grid-size sweep: the best over the candidates, and each candidate's figure.
  Measurement measure(const Variant& v, std::size_t bytes) {
    Measurement m;
    m.ran = true;
    if (v.kernel == nullptr) {
      m.ms = median_ms(v, bytes, 0);
      m.gbps = example::gb_per_s(static_cast<double>(bytes), m.ms);
      return m;
    }
    int occupancy = 0;
    IRIS_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occupancy, v.kernel, kThreadsPerBlock, 0));
    const std::size_t bytes_per_block =
        std::size_t{kVectorBytes} * v.vectors_per_thread * kThreadsPerBlock;
    const auto one_pass_blocks =
        static_cast<int>(std::max<std::size_t>(1, (bytes + bytes_per_block - 1) / bytes_per_block));
    std::vector<std::pair<std::string, int>> grids{{kOnePass, one_pass_blocks}};
    for (const int per_sm : kBlocksPerSmCandidates) {
      // A persistent grid as large as the one-pass grid is the same grid.
      if (per_sm <= occupancy && per_sm * sms_ < one_pass_blocks)
        grids.emplace_back(std::to_string(per_sm) + "/SM", per_sm * sms_);
    }
    for (const auto& [label, blocks] : grids) {
      const double ms = median_ms(v, bytes, blocks);
      const double gbps = example::gb_per_s(static_cast<double>(bytes), ms);
      m.gbps_by_grid[label] = gbps;
      if (gbps > m.gbps) {
        m.gbps = gbps;
        m.ms = ms;
        m.blocks = blocks;
        m.grid = label;
      }
    }
    return m;
  }

 private:
  iris::Buffer<float>& dst_;
  iris::Buffer<float>& src_;
  int samples_;
  int sms_;
  cudaStream_t stream_{};
  unsigned long long* wrong_ = nullptr;
  std::size_t calls_made_ = 0;
};

std::string size_label(std::size_t bytes) {
  if (bytes >= (1u << 30)) return std::to_string(bytes >> 30) + "G";
  if (bytes >= (1u << 20)) return std::to_string(bytes >> 20) + "M";
  return std::to_string(bytes >> 10) + "K";
}

const char* gbps_format(double gbps) {
  return gbps < 10 ? "%.2f" : gbps < 100 ? "%.1f" : "%.0f";
}

}  // namespace

int main(int argc, char** argv) {
  if (!example::gpu_visible("rma_bandwidth")) return 0;
  const std::size_t max_bytes =
      static_cast<std::size_t>(example::number_arg(argc, argv, "--max-mib", 1024)) << 20;
  const int samples = static_cast<int>(example::number_arg(argc, argv, "--samples", 21));
  const std::string json_path = iris::bench::json_path_from_args(argc, argv);
  try {
    iris::ContextOptions options;
    // Two buffers of max_bytes on every rank, plus room for Iris's reserved bytes.
    options.heap_size = 2 * max_bytes + (std::size_t{64} << 20);
    auto ctx = iris::Context::from_env(options);
    if (ctx.world_size() < 2) {
      std::fprintf(stderr, "rma_bandwidth: needs at least 2 ranks (iris-run -n 2 ...)\n");
      return 1;
    }
    constexpr int kPeer = 1;
    const std::size_t floats = max_bytes / sizeof(float);
    // Each rank's source differs (the seed), so data from the wrong rank cannot pass the check.
    auto src = ctx.uniform<float>(floats, -1.0f, 1.0f, 1000 + ctx.rank());
    auto dst = ctx.empty<float>(floats);
    const std::vector<int> devices = iris::bench::device_of_each_rank(ctx.bootstrap());
    const bool shared_gpu = devices[0] >= 0 && devices[0] == devices[kPeer];

    std::vector<std::size_t> sizes;
    for (std::size_t bytes = 1024; bytes <= max_bytes; bytes *= 4) sizes.push_back(bytes);
    // The grid sweep is shown at the largest size up to 256 MiB: far past the L2, still quick.
    const std::size_t sweep_bytes =
        *std::prev(std::upper_bound(sizes.begin(), sizes.end(), std::size_t{256} << 20));

    Bench bench(dst, src, samples);
    const PlainBuffers plain(ctx, src.data(), floats, devices, kPeer);
    const std::vector<Variant> variants = make_variants(ctx, dst, src, kPeer, devices, plain);
    // Ratios are taken against the driver's copy between the same two GPUs: cudaMemcpy D2D when
    // the ranks share a GPU (a copy kernel on the SMs, as the records before multi-GPU runs
    // have it), cudaMemcpyPeerAsync between plain cudaMalloc buffers otherwise (a copy engine),
    // and cudaMemcpy D2D again where the GPUs cannot reach each other.
    const auto index_of = [&](const std::string& op) {
      return static_cast<std::size_t>(std::find_if(variants.begin(), variants.end(),
                                                   [&](const Variant& v) { return v.op == op; }) -
                                      variants.begin());
    };
    const bool link_reference = !shared_gpu && plain.reaches;  // rank 0's view, where it counts
    const std::size_t reference = link_reference ? index_of(kPlainPeerName) : index_of(kMemcpyName);
    const std::string reference_name = variants[reference].op;
    // results[variant][size]
    std::vector<std::vector<Measurement>> results(variants.size(),
                                                  std::vector<Measurement>(sizes.size()));
    int failures = 0;
    for (std::size_t v = 0; v < variants.size(); ++v) {
      for (std::size_t s = 0; s < sizes.size(); ++s) {
        ctx.barrier();  // every rank alive and idle: rank 0 has the GPU(s) to itself
        if (ctx.rank() != 0) continue;
        const Variant& variant = variants[v];
        try {
          if (const auto wrong = bench.check(variant, sizes[s], bench.sms()); wrong != 0) {
            std::printf("WRONG: %s %s, %zu bytes: %llu of %zu 4-byte words differ\n",
                        variant.op.c_str(), variant.coop.c_str(), sizes[s], wrong,
                        sizes[s] / sizeof(unsigned));
            ++failures;
          }
          Measurement& m = results[v][s];
          m = bench.measure(variant, sizes[s]);
          if (v == reference) {
            m.ratio = 1.0;
          } else {
            try {
              m.ratio = bench.paired_ratio(variant, m.blocks, variants[reference], sizes[s]);
            } catch (const iris::Error&) {
              m.ratio = 0;  // the reference fails here (it says so when measured): no ratio
            }
          }
        } catch (const iris::Error& error) {
          // A baseline the platform refuses (say, cudaMemcpyPeer on imported memory) is left out;
          // an Iris op that fails is a failure.
          std::printf("%s %s, %zu bytes: %s\n", variant.op.c_str(), variant.coop.c_str(), sizes[s],
                      error.what());
          if (variant.kernel != nullptr) ++failures;
        }
      }
    }
    ctx.barrier();
    if (ctx.rank() != 0) return 0;

    std::vector<iris::bench::Row> gbps_rows, ratio_rows, sweep_rows, link_rows, json_rows;
    double lowest_block_ratio = INFINITY;  // bulk moves by whole blocks, >= 64 MiB
    std::string lowest_block;
    double lowest_block_link = INFINITY;  // the same moves' fraction of the link's rate
    std::string lowest_link_block;
    for (std::size_t v = 0; v < variants.size(); ++v) {
      // Rows whose bytes cross NVLink (all but the local copies) get a fraction of its rate.
      const bool crosses_link = !shared_gpu && variants[v].src_rank != variants[v].dst_rank;
      iris::bench::Row gbps_row, ratio_row, sweep_row, link_row;
      link_row.text("op", variants[v].op).text("coop", variants[v].coop);
      gbps_row.text("op", variants[v].op).text("coop", variants[v].coop);
      ratio_row.text("op", variants[v].op).text("coop", variants[v].coop);
      sweep_row.text("op", variants[v].op).text("coop", variants[v].coop);
      for (std::size_t s = 0; s < sizes.size(); ++s) {
        const Measurement& m = results[v][s];
        if (!m.ran) {
          gbps_row.text(size_label(sizes[s]), "n/a");
          ratio_row.text(size_label(sizes[s]), "n/a");
          link_row.text(size_label(sizes[s]), "n/a");
          if (sizes[s] == sweep_bytes)
            for (const std::string& label : grid_labels()) sweep_row.text(label, "n/a");
          continue;
        }
        const bool has_ratio = m.ratio > 0;
        gbps_row.number(size_label(sizes[s]), m.gbps, gbps_format(m.gbps));
        if (has_ratio) {
          ratio_row.number(size_label(sizes[s]), m.ratio, "%.2f");
        } else {
          ratio_row.text(size_label(sizes[s]), "n/a");
        }
        iris::bench::Row json_row;
        json_row.text("op", variants[v].op)
            .text("coop", variants[v].coop)
            .number("bytes", static_cast<double>(sizes[s]), "%.0f")
            .number("GBps", m.gbps)
            .number("ms_median", m.ms, "%.4f")
            .number("blocks", m.blocks, "%.0f");
        if (!m.grid.empty()) json_row.text("grid", m.grid);
        if (has_ratio) json_row.number("ratio", m.ratio).text("ratio_to", reference_name);
        if (crosses_link) {
          json_row.number("of_450", m.gbps / kLinkGBps);
          link_row.number(size_label(sizes[s]), m.gbps / kLinkGBps, "%.2f");
        } else {
          link_row.text(size_label(sizes[s]), "local");
        }
        json_rows.push_back(json_row);
        const bool bulk_block_op =
            variants[v].coop == "block" &&
            (variants[v].op == "put" || variants[v].op == "get" || variants[v].op == "copy");
        if (bulk_block_op && has_ratio && sizes[s] >= (std::size_t{64} << 20) &&
            m.ratio < lowest_block_ratio) {
          lowest_block_ratio = m.ratio;
          lowest_block = variants[v].op + " block at " + size_label(sizes[s]);
        }
        if (bulk_block_op && crosses_link && sizes[s] >= (std::size_t{64} << 20) &&
            m.gbps / kLinkGBps < lowest_block_link) {
          lowest_block_link = m.gbps / kLinkGBps;
          lowest_link_block = variants[v].op + " block at " + size_label(sizes[s]);
        }
        if (sizes[s] == sweep_bytes) {
          for (const std::string& label : grid_labels()) {
            const auto it = m.gbps_by_grid.find(label);
            if (it == m.gbps_by_grid.end()) {
              sweep_row.text(label, "-");
            } else {
              sweep_row.number(label, it->second, gbps_format(it->second));
            }
          }
        }
      }
      gbps_rows.push_back(gbps_row);
      ratio_rows.push_back(ratio_row);
      sweep_rows.push_back(sweep_row);
      link_rows.push_back(link_row);
    }

    const std::string convention =
        "GB/s = payload bytes / time (1e9 B/s): moving N bytes counts N. Median of " +
        std::to_string(samples) + " samples, " + std::to_string(kThreadsPerBlock) +
        " threads/block, best grid of: one pass (a block per " +
        std::to_string(kThreadsPerBlock * kVectorsPerThread * kVectorBytes / 1024) +
        " KiB, each thread moving its " + std::to_string(kVectorsPerThread) +
        " vectors once; the plain kernel one) or persistent, {1,2,4,8} blocks/SM (up to "
        "occupancy) x " +
        std::to_string(bench.sms()) +
        " SMs. put/copy/store/kernel/cudaMemcpyPeer: rank 0 -> rank 1; get/load: rank 1 -> rank "
        "0.";
    const std::string where =
        (shared_gpu ? "ranks 0 and 1 share one GPU (MPS): 'peer' memory is the same HBM, so every "
                      "op reads N and writes N bytes of HBM (HBM traffic = 2 x GB/s). "
                    : "ranks 0 and 1 are on different GPUs: peer traffic crosses NVLink. ") +
        ("Reference copy: " + plain.how + ".");
    iris::bench::print_table("RMA bandwidth, GB/s, by size", gbps_rows, convention + "\n" + where);
    iris::bench::print_table("ratio to " + reference_name + " of the same size", ratio_rows,
                             "median over " + std::to_string(samples) +
                                 " samples of reference time / op time, the two timed in turn "
                                 "(at the op's best grid)");
    iris::bench::print_table(
        "grid sweep at " + size_label(sweep_bytes) + ", GB/s: one pass, then persistent grids",
        sweep_rows);
    if (!shared_gpu) {
      iris::bench::print_table("GB/s / 450 GB/s (NVLink 4 per direction, H100/H200), by size",
                               link_rows, "'local': a copy within rank 0's GPU, no link crossed");
    } else {
      std::printf(
          "\nno fraction of 450 GB/s (NVLink 4 per direction): the ranks share one GPU, "
          "so no link is crossed\n");
    }
    if (!lowest_block.empty()) {
      std::printf("\nlowest ratio to %s of put/get/copy by blocks at >= 64 MiB: %.3f (%s)\n",
                  reference_name.c_str(), lowest_block_ratio, lowest_block.c_str());
    }
    if (!lowest_link_block.empty()) {
      std::printf("lowest fraction of 450 GB/s of put/get/copy by blocks at >= 64 MiB: %.3f (%s)\n",
                  lowest_block_link, lowest_link_block.c_str());
    }
    iris::bench::write_json(json_path, "rma_bandwidth", json_rows, convention + " " + where);
    if (failures != 0) {
      std::printf("WRONG: rma_bandwidth: %d checks FAILED\n", failures);
      return 1;
    }
    return 0;
  } catch (const iris::Error& error) {
    std::fprintf(stderr, "rma_bandwidth: %s\n", error.what());
    return 1;
  }
}
