// One-off study (session 3): where do put<block>'s last 5% at 64 MiB go?  Run inside the real
// setting: iris heap, destination on rank 1 through its imported mapping, MPS.  Every variant is
// checked once, then timed in turn with cudaMemcpy D2D on the heap (paired ratio, median).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "iris/iris.hpp"
#include "report.hpp"

namespace {

__host__ __device__ constexpr std::size_t ceil_div(std::size_t a, std::size_t b) {
  return (a + b - 1) / b;
}

// Split of `count` floats among `groups` groups, tiles of at most `max_tile` floats.
enum class Split { kStride, kBalanced, kBalanced16, kSlab };

struct Tiling {
  std::size_t tile;    // floats per tile (multiple of 4)
  std::size_t tiles;   // how many tiles
};

__host__ __device__ inline Tiling tiling(Split split, std::size_t count, std::size_t groups,
                                         std::size_t max_tile) {
  if (split == Split::kStride) return {max_tile, ceil_div(count, max_tile)};
  if (split == Split::kSlab) {
    const std::size_t tile = ceil_div(ceil_div(count, groups), 4) * 4;
    return {tile, ceil_div(count, tile)};
  }
  const std::size_t rounds = ceil_div(count, groups * max_tile);
  const std::size_t align = split == Split::kBalanced16 ? 4 : 32;
  const std::size_t tile = ceil_div(ceil_div(count, groups * rounds), align) * align;
  return {tile, ceil_div(count, tile)};
}

template <Split kSplit, bool kGet>
__global__ void lib_move(const __grid_constant__ iris::device::Context ctx, float* dst,
                         const float* src, std::size_t count, int peer) {
  const iris::block group{};
  const Tiling t = tiling(kSplit, count, gridDim.x, std::size_t{blockDim.x} * 16);
  for (std::size_t k = blockIdx.x; k < t.tiles; k += gridDim.x) {
    const std::size_t start = k * t.tile, n = std::min(t.tile, count - start);
    if constexpr (kGet)
      iris::device::get(group, ctx, dst + start, src + start, n, peer);
    else
      iris::device::put(group, ctx, dst + start, src + start, n, peer);
  }
}

// Raw mover: D loads in flight, predicated last batch, cache hint H on loads/stores.
// H: 0 none, 1 st.cs, 2 ld L1::no_allocate, 3 ld L2::evict_first + st.cs, 4 ld.nc + st.cs,
//    5 ld L1::no_allocate + st L1::no_allocate... (stores do not allocate in L1 anyway) -> st.wt? no:
//    5 = ld.lu + st.cs
template <int H>
__device__ __forceinline__ uint4 ld(const uint4* p) {
  uint4 v;
  if constexpr (H == 0 || H == 1) {
    v = *p;
  } else if constexpr (H == 2) {
    asm volatile("ld.global.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  } else if constexpr (H == 3) {
    asm volatile(
        "{ .reg .b64 pol; createpolicy.fractional.L2::evict_first.b64 pol, 1.0;\n"
        "ld.global.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], pol; }"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  } else if constexpr (H == 4) {
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  } else {
    asm volatile("ld.global.lu.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  }
  return v;
}
template <int H>
__device__ __forceinline__ void st(uint4* p, uint4 v) {
  if constexpr (H == 0 || H == 2) {
    *p = v;
  } else {
    asm volatile("st.global.cs.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y),
                 "r"(v.z), "r"(v.w)
                 : "memory");
  }
}

template <int D, int H>
__device__ __forceinline__ void raw_units(std::size_t rank, std::size_t size, uint4* d,
                                          const uint4* s, std::size_t units) {
  for (std::size_t i = rank; i < units; i += D * size) {
    uint4 v[D];
#pragma unroll
    for (int k = 0; k < D; ++k)
      if (i + k * size < units) v[k] = ld<H>(s + i + k * size);
#pragma unroll
    for (int k = 0; k < D; ++k)
      if (i + k * size < units) st<H>(d + i + k * size, v[k]);
  }
}

template <Split kSplit, int D, int H>
__global__ void raw_move(float* dst, const float* src, std::size_t count) {
  const Tiling t = tiling(kSplit, count, gridDim.x, std::size_t{blockDim.x} * 4 * D);
  for (std::size_t k = blockIdx.x; k < t.tiles; k += gridDim.x) {
    const std::size_t start = k * t.tile, n = std::min(t.tile, count - start);
    raw_units<D, H>(threadIdx.x, blockDim.x, reinterpret_cast<uint4*>(dst + start),
                    reinterpret_cast<const uint4*>(src + start), n / 4);
  }
}

__global__ void plain_copy(uint4* dst, const uint4* src, std::size_t vectors) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < vectors;
       i += std::size_t{gridDim.x} * blockDim.x)
    dst[i] = src[i];
}

__global__ void count_mismatches(const uint4* got, const uint4* want, std::size_t vectors,
                                 unsigned long long* wrong) {
  unsigned long long mine = 0;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < vectors;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const uint4 a = got[i], b = want[i];
    mine += a.x != b.x || a.y != b.y || a.z != b.z || a.w != b.w;
  }
  if (mine) atomicAdd(wrong, mine);
}

struct Variant {
  std::string name;
  const void* kernel;
  bool get;  // dst local, src peer
  std::function<void(float* dst, const float* src, std::size_t count, int blocks, int threads,
                     cudaStream_t)>
      go;
};

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const int samples = static_cast<int>(iris::bench::number_arg(argc, argv, "--samples", 41));
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
  float* peer_dst = dst.on(kPeer);
  const float* peer_src = src.on(kPeer);
  float* const dst_local = dst.data();
  const float* const src_local = src.data();

  std::vector<Variant> vs;
#define LIB(NAME, SPLIT, GET)                                                                 \
  vs.push_back({NAME, reinterpret_cast<const void*>(&lib_move<SPLIT, GET>), GET,              \
                [=](float* d, const float* s, std::size_t n, int b, int t, cudaStream_t q) { \
                  /* the library translates: hand it this rank's symmetric addresses */       \
                  if (GET) s -= peer_src - src_local; else d -= peer_dst - dst_local;         \
                  lib_move<SPLIT, GET><<<b, t, 0, q>>>(dev, d, s, n, kPeer);                 \
                }})
#define RAW(NAME, SPLIT, D, H)                                                         \
  vs.push_back({NAME, reinterpret_cast<const void*>(&raw_move<SPLIT, D, H>), false,    \
                [](float* d, const float* s, std::size_t n, int b, int t, cudaStream_t q) { \
                  raw_move<SPLIT, D, H><<<b, t, 0, q>>>(d, s, n);                      \
                }})
  LIB("lib put balanced128", Split::kBalanced, false);
  LIB("lib put stride32k", Split::kStride, false);
  LIB("lib put balanced16", Split::kBalanced16, false);
  LIB("lib get balanced128", Split::kBalanced, true);
  RAW("raw balanced D4", Split::kBalanced, 4, 0);
  RAW("raw balanced D4 st.cs", Split::kBalanced, 4, 1);
  RAW("raw balanced D4 ld.L2ef+st.cs", Split::kBalanced, 4, 3);
  RAW("raw balanced D4 ld.nc+st.cs", Split::kBalanced, 4, 4);
  RAW("raw balanced D4 ld.L1na", Split::kBalanced, 4, 2);
  RAW("raw balanced D4 ld.lu+st.cs", Split::kBalanced, 4, 5);
  RAW("raw balanced D8", Split::kBalanced, 8, 0);
  RAW("raw balanced D8 st.cs", Split::kBalanced, 8, 1);
  RAW("raw stride D4", Split::kStride, 4, 0);
  LIB("lib put slab", Split::kSlab, false);
  vs.push_back({"plain 16B kernel", reinterpret_cast<const void*>(&plain_copy), false,
                [](float* d, const float* s, std::size_t n, int b, int t, cudaStream_t q) {
                  plain_copy<<<b, t, 0, q>>>(reinterpret_cast<uint4*>(d),
                                             reinterpret_cast<const uint4*>(s), n / 4);
                }});

  cudaStream_t stream;
  IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  unsigned long long* wrong;
  IRIS_CUDA_CHECK(cudaMalloc(&wrong, sizeof *wrong));
  std::size_t calls = 0;

  for (const std::size_t bytes : {std::size_t{64} << 20, std::size_t{256} << 20}) {
    const std::size_t n = bytes / sizeof(float), slots = pool_floats / n;
    iris::bench::Repeats one;
    one.samples = 1;
    one.warmup = 1;
    one.calls_per_sample = static_cast<int>(std::max<std::size_t>(1, (256u << 20) / bytes));
    auto time_one = [&](auto&& enqueue) {
      return iris::bench::time_calls_ms(stream, one, [&](long) {
               const std::size_t off = calls++ % slots * n;
               enqueue(off);
             }).front();
    };
    std::printf("\n== %zu MiB: paired ratio to cudaMemcpy D2D (median of %d), GB/s median\n",
                bytes >> 20, samples);
    for (const Variant& v : vs) {
      for (const int threads : {512, 1024}) {
        int occupancy = 0;
        IRIS_CUDA_CHECK(
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occupancy, v.kernel, threads, 0));
        for (const int per_sm : {1, 2, 3}) {
          if (per_sm > occupancy || threads * per_sm > 2048) continue;
          const int blocks = per_sm * sms;
          float* d = v.get ? dst.data() : peer_dst;
          const float* s = v.get ? peer_src : src.data();
          // check once
          IRIS_CUDA_CHECK(cudaMemsetAsync(d, 0xff, bytes, stream));
          std::printf("  (checking %s %dx%d)\n", v.name.c_str(), threads, per_sm);
          v.go(d, s, n, blocks, threads, stream);
          IRIS_CUDA_CHECK(cudaGetLastError());
          IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
          IRIS_CUDA_CHECK(cudaMemsetAsync(wrong, 0, sizeof *wrong, stream));
          count_mismatches<<<2 * sms, 256, 0, stream>>>(reinterpret_cast<const uint4*>(d),
                                                        reinterpret_cast<const uint4*>(s),
                                                        bytes / 16, wrong);
          unsigned long long bad = 0;
          IRIS_CUDA_CHECK(cudaMemcpyAsync(&bad, wrong, sizeof bad, cudaMemcpyDeviceToHost, stream));
          IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
          std::vector<double> ratios, ms;
          for (int k = 0; k < samples; ++k) {
            const double ref = time_one([&](std::size_t off) {
              IRIS_CUDA_CHECK(cudaMemcpyAsync(dst.data() + off, src.data() + off, bytes,
                                              cudaMemcpyDeviceToDevice, stream));
            });
            const double mine =
                time_one([&](std::size_t off) { v.go(d + off, s + off, n, blocks, threads, stream); });
            ratios.push_back(ref / mine);
            ms.push_back(mine);
          }
          const auto r = iris::bench::summarize(ratios);
          const double gbps = iris::bench::gb_per_s(bytes, iris::bench::summarize(ms).median);
          std::printf("%-32s %4dx%d  ratio %.3f  (%.0f GB/s)%s\n", v.name.c_str(), threads, per_sm,
                      r.median, gbps, bad ? "  WRONG" : "");
        }
      }
    }
  }
  ctx.barrier();
  return 0;
}
