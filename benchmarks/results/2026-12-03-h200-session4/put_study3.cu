// One-off study (session 4): can a Hopper bulk-copy (TMA, cp.async.bulk) pipeline move a put
// faster than registers do?  Same setting as put_study2: iris heap, destination on rank 1
// through its mapping, MPS; paired ratio to cudaMemcpy D2D, median of many.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "iris/iris.hpp"
#include "report.hpp"

namespace {

__device__ __forceinline__ std::uint32_t sm_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void bar_init(std::uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(sm_addr(bar)) : "memory");
}
__device__ __forceinline__ void bulk_load(void* smem, const void* src, std::uint32_t bytes,
                                          std::uint64_t* bar) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sm_addr(bar)),
               "r"(bytes)
               : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(sm_addr(smem)),
      "l"(src), "r"(bytes), "r"(sm_addr(bar))
      : "memory");
}
__device__ __forceinline__ void bar_wait(std::uint64_t* bar, std::uint32_t parity) {
  asm volatile(
      "{ .reg .pred done;\n"
      "WAIT_%=: mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=; }" ::"r"(sm_addr(bar)),
      "r"(parity)
      : "memory");
}
template <int kHint>
__device__ __forceinline__ void bulk_store(void* dst, const void* smem, std::uint32_t bytes) {
  if constexpr (kHint == 0)
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst),
                 "r"(sm_addr(smem)), "r"(bytes)
                 : "memory");
  else
    asm volatile(
        "{ .reg .b64 pol; createpolicy.fractional.L2::evict_first.b64 pol, 1.0;\n"
        "cp.async.bulk.global.shared::cta.bulk_group.L2::cache_hint [%0], [%1], %2, pol; }" ::"l"(
            dst),
        "r"(sm_addr(smem)), "r"(bytes)
        : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wait_reads() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

// Lane 0 of every warp runs its own pipeline of kStages stages of `chunk` bytes; chunks are
// dealt round-robin over all warps of the grid.
template <int kStages, int kHint, bool kSlab = false>
__global__ void bulk_move(std::byte* dst, const std::byte* src, std::size_t bytes,
                          std::uint32_t chunk) {
  extern __shared__ __align__(128) std::byte smem[];
  const unsigned warp = threadIdx.x / 32, warps = blockDim.x / 32;
  std::byte* stage = smem + std::size_t{warp} * kStages * chunk;
  auto* bars = reinterpret_cast<std::uint64_t*>(smem + std::size_t{warps} * kStages * chunk) +
               warp * kStages;
  if (threadIdx.x % 32 != 0) return;
  for (int s = 0; s < kStages; ++s) bar_init(&bars[s]);
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  const std::size_t issuer = std::size_t{blockIdx.x} * warps + warp;
  const std::size_t issuers = std::size_t{gridDim.x} * warps;
  const std::size_t chunks = (bytes + chunk - 1) / chunk;
  // Round-robin chunks, or (kSlab) one contiguous run of chunks per issuer.
  const std::size_t per = (chunks + issuers - 1) / issuers;
  const std::size_t first = kSlab ? std::min(chunks, issuer * per) : issuer;
  const std::size_t mine =
      kSlab ? std::min(chunks, first + per) - first
            : (issuer < chunks ? (chunks - issuer + issuers - 1) / issuers : 0);
  auto at = [&](std::size_t i) { return (kSlab ? first + i : issuer + i * issuers) * chunk; };
  auto len = [&](std::size_t i) {
    return static_cast<std::uint32_t>(std::min<std::size_t>(chunk, bytes - at(i)));
  };
  for (std::size_t i = 0; i < mine && i < kStages; ++i)
    bulk_load(stage + i * chunk, src + at(i), len(i), &bars[i]);
  for (std::size_t i = 0; i < mine; ++i) {
    const int s = static_cast<int>(i % kStages);
    bar_wait(&bars[s], static_cast<std::uint32_t>((i / kStages) & 1));
    bulk_store<kHint>(dst + at(i), stage + s * chunk, len(i));
    // Refill the stage of the previous chunk once its store has read it (one store stays open).
    if (i >= 1 && i - 1 + kStages < mine) {
      wait_reads<1>();
      const std::size_t j = i - 1 + kStages;
      const int r = static_cast<int>((i - 1) % kStages);
      bulk_load(stage + r * chunk, src + at(j), len(j), &bars[r]);
    }
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

template <int D>
__global__ void raw_stride(uint4* dst, const uint4* src, std::size_t units) {
  const std::size_t tile = std::size_t{blockDim.x} * D;
  for (std::size_t start = blockIdx.x * tile; start < units; start += gridDim.x * tile) {
    const std::size_t n = std::min(tile, units - start);
    for (std::size_t i = threadIdx.x; i < n; i += D * blockDim.x) {
      uint4 v[D];
#pragma unroll
      for (int k = 0; k < D; ++k)
        if (i + k * blockDim.x < n) v[k] = src[start + i + k * blockDim.x];
#pragma unroll
      for (int k = 0; k < D; ++k)
        if (i + k * blockDim.x < n) dst[start + i + k * blockDim.x] = v[k];
    }
  }
}

__global__ void lib_put(const __grid_constant__ iris::device::Context ctx, float* dst,
                        const float* src, std::size_t count, int peer) {
  const std::size_t tile = std::size_t{blockDim.x} * 16;
  for (std::size_t start = blockIdx.x * tile; start < count; start += gridDim.x * tile)
    iris::device::put(iris::block{}, ctx, dst + start, src + start, std::min(tile, count - start),
                      peer);
}

__global__ void plain_copy(uint4* dst, const uint4* src, std::size_t vectors) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < vectors;
       i += std::size_t{gridDim.x} * blockDim.x)
    dst[i] = src[i];
}

struct Config {
  std::string name;
  int threads, per_sm;
  std::size_t smem;
  std::function<void(std::byte* d, const std::byte* s, std::size_t bytes, int blocks,
                     cudaStream_t)>
      go;
};

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const int samples = static_cast<int>(iris::bench::number_arg(argc, argv, "--samples", 101));
  iris::ContextOptions options;
  options.heap_size = (std::size_t{2} << 30) + (std::size_t{64} << 20);
  auto ctx = iris::Context::from_env(options);
  constexpr int kPeer = 1;
  const std::size_t pool_floats = (std::size_t{1} << 30) / sizeof(float);
  auto src = ctx.uniform<float>(pool_floats, -1.0f, 1.0f, 1000 + ctx.rank());
  auto dst = ctx.empty<float>(pool_floats);
  if (ctx.rank() != 0) {
    ctx.barrier();
    return 0;
  }
  const iris::device::Context dev = ctx.device();
  const int sms = iris::bench::sm_count();
  auto* peer_dst = reinterpret_cast<std::byte*>(dst.on(kPeer));
  auto* const dst_local = reinterpret_cast<std::byte*>(dst.data());
  auto* const src_local = reinterpret_cast<const std::byte*>(src.data());

  std::vector<Config> cs;
  auto bulk = [&](int stages, int warps, std::uint32_t chunk, int per_sm, int hint) {
    // hint 2: slab per issuer instead of round-robin chunks
    const std::size_t smem = static_cast<std::size_t>(warps) * stages * (chunk + 8);
    char name[96];
    std::snprintf(name, sizeof name, "bulk S%d x %uK, %d warp(s)%s", stages, chunk >> 10, warps,
                  hint == 1 ? " evict_first" : hint == 2 ? " slab" : "");
    const void* k = nullptr;
    std::function<void(std::byte*, const std::byte*, std::size_t, int, cudaStream_t)> go;
#define BULK_CASE(S, H)                                                                      \
  if (stages == S && hint == H) {                                                          \
    k = reinterpret_cast<const void*>(&bulk_move<S, H % 2, H == 2>);                        \
    go = [=](std::byte* d, const std::byte* s, std::size_t n, int b, cudaStream_t q) {     \
      bulk_move<S, H % 2, H == 2><<<b, warps * 32, smem, q>>>(d, s, n, chunk);             \
    };                                                                                     \
  }
    BULK_CASE(2, 0) BULK_CASE(3, 0) BULK_CASE(4, 0) BULK_CASE(6, 0) BULK_CASE(8, 0)
    BULK_CASE(12, 0) BULK_CASE(4, 1) BULK_CASE(4, 2) BULK_CASE(8, 2)
#undef BULK_CASE
    IRIS_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem)));
    cs.push_back({name, warps * 32, per_sm, smem, go});
  };
  cs.push_back({"lib put stride32k", 512, 1, 0,
                [=](std::byte* d, const std::byte* s, std::size_t n, int b, cudaStream_t q) {
                  lib_put<<<b, 512, 0, q>>>(dev, reinterpret_cast<float*>(d - (peer_dst - dst_local)),
                                            reinterpret_cast<const float*>(s), n / 4, kPeer);
                }});
  cs.push_back({"raw stride D4", 512, 1, 0,
                [](std::byte* d, const std::byte* s, std::size_t n, int b, cudaStream_t q) {
                  raw_stride<4><<<b, 512, 0, q>>>(reinterpret_cast<uint4*>(d),
                                                  reinterpret_cast<const uint4*>(s), n / 16);
                }});
  for (int per_sm : {3, 4})
    cs.push_back({"plain 16B kernel", 512, per_sm, 0,
                  [](std::byte* d, const std::byte* s, std::size_t n, int b, cudaStream_t q) {
                    plain_copy<<<b, 512, 0, q>>>(reinterpret_cast<uint4*>(d),
                                                 reinterpret_cast<const uint4*>(s), n / 16);
                  }});
  bulk(4, 1, 16 << 10, 1, 0);
  bulk(4, 1, 16 << 10, 2, 0);
  bulk(4, 1, 16 << 10, 3, 0);
  bulk(8, 1, 16 << 10, 1, 0);
  bulk(12, 1, 16 << 10, 1, 0);
  bulk(4, 1, 32 << 10, 1, 0);
  bulk(6, 1, 32 << 10, 1, 0);
  bulk(3, 1, 64 << 10, 1, 0);
  bulk(8, 1, 8 << 10, 1, 0);
  bulk(8, 1, 8 << 10, 2, 0);
  bulk(12, 1, 8 << 10, 2, 0);
  bulk(8, 1, 4 << 10, 2, 0);
  bulk(8, 1, 4 << 10, 4, 0);
  bulk(2, 4, 16 << 10, 1, 0);
  bulk(3, 4, 8 << 10, 1, 0);
  bulk(4, 4, 4 << 10, 2, 0);
  bulk(2, 8, 8 << 10, 1, 0);
  bulk(4, 1, 16 << 10, 2, 1);
  bulk(4, 1, 16 << 10, 2, 2);
  bulk(8, 1, 16 << 10, 1, 2);
  bulk(8, 1, 8 << 10, 2, 2);
  bulk(8, 1, 16 << 10, 1, 0);  // again, for the spread between runs

  cudaStream_t stream;
  IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  unsigned long long* wrong;
  IRIS_CUDA_CHECK(cudaMalloc(&wrong, sizeof *wrong));
  std::size_t calls = 0;
  const std::size_t pool = pool_floats * sizeof(float);

  for (const std::size_t bytes : {std::size_t{64} << 20, std::size_t{256} << 20,
                                  std::size_t{1} << 30}) {
    const std::size_t slots = pool / bytes;
    iris::bench::Repeats one;
    one.samples = 1;
    one.warmup = 1;
    one.calls_per_sample = static_cast<int>(std::max<std::size_t>(1, (256u << 20) / bytes));
    auto time_one = [&](auto&& enqueue) {
      return iris::bench::time_calls_ms(stream, one, [&](long) {
               enqueue(calls++ % slots * bytes);
             }).front();
    };
    std::printf("\n== %zu MiB: paired ratio to cudaMemcpy D2D (median of %d), GB/s median\n",
                bytes >> 20, samples);
    for (const Config& c : cs) {
      const int blocks = c.per_sm * sms;
      IRIS_CUDA_CHECK(cudaMemsetAsync(peer_dst, 0xff, bytes, stream));
      c.go(peer_dst, src_local, bytes, blocks, stream);
      IRIS_CUDA_CHECK(cudaGetLastError());
      IRIS_CUDA_CHECK(cudaMemsetAsync(wrong, 0, sizeof *wrong, stream));
      using Word = unsigned long long;
      iris::bench::count_mismatches<Word><<<2 * sms, 256, 0, stream>>>(
          reinterpret_cast<const Word*>(peer_dst), reinterpret_cast<const Word*>(src_local),
          bytes / sizeof(Word), 0, Word{0}, wrong);
      unsigned long long bad = 0;
      IRIS_CUDA_CHECK(cudaMemcpyAsync(&bad, wrong, sizeof bad, cudaMemcpyDeviceToHost, stream));
      IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
      std::vector<double> ratios, ms;
      for (int k = 0; k < samples; ++k) {
        const double ref = time_one([&](std::size_t off) {
          IRIS_CUDA_CHECK(cudaMemcpyAsync(dst_local + off, src_local + off, bytes,
                                          cudaMemcpyDeviceToDevice, stream));
        });
        const double mine =
            time_one([&](std::size_t off) { c.go(peer_dst + off, src_local + off, bytes, blocks, stream); });
        ratios.push_back(ref / mine);
        ms.push_back(mine);
      }
      const auto r = iris::bench::summarize(ratios);
      const double gbps = iris::bench::gb_per_s(bytes, iris::bench::summarize(ms).median);
      std::printf("%-40s %4dx%d  ratio %.3f  (%.0f GB/s)%s\n", c.name.c_str(), c.threads,
                  c.per_sm, r.median, gbps, bad ? "  WRONG" : "");
    }
  }
  ctx.barrier();
  return 0;
}
