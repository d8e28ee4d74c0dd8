// One-off study: why does a 16-byte copy kernel reach only ~0.93-0.95 of cudaMemcpy D2D at 64 MiB
// on an H200? Variants of partition, depth, grid and cache hints, timed like rma_bandwidth
// (rotating buffers, CUDA events, median).
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("%s: %s\n", #x, cudaGetErrorString(e)); std::exit(1);} } while (0)

template <int Hint> __device__ __forceinline__ uint4 ld(const uint4* p) {
  if constexpr (Hint == 0) return *p;
  uint4 v;
  if constexpr (Hint == 1 || Hint == 2)
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  if constexpr (Hint == 3)
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
template <int Hint> __device__ __forceinline__ void st(uint4* p, uint4 v) {
  if constexpr (Hint == 2) asm volatile("st.global.cs.v4.u32 [%0], {%1,%2,%3,%4};" :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
  else *p = v;
}

// team moves units; member r takes r, r+size...; D in flight.
template <int D, int Hint> __device__ __forceinline__ void team_copy(std::size_t rank, std::size_t size, uint4* d, const uint4* s, std::size_t n) {
  std::size_t i = rank;
  for (; i + (D - 1) * size < n; i += D * size) {
    uint4 v[D];
#pragma unroll
    for (int k = 0; k < D; ++k) v[k] = ld<Hint>(s + i + k * size);
#pragma unroll
    for (int k = 0; k < D; ++k) st<Hint>(d + i + k * size, v[k]);
  }
  for (; i < n; i += size) st<Hint>(d + i, ld<Hint>(s + i));
}

__global__ void plain(uint4* d, const uint4* s, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x) d[i] = s[i];
}
template <int D, int Hint> __global__ void grid_team(uint4* d, const uint4* s, std::size_t n) {
  team_copy<D, Hint>(blockIdx.x * std::size_t{blockDim.x} + threadIdx.x, std::size_t{gridDim.x} * blockDim.x, d, s, n);
}
// current benchmark "block": tiles of blockDim*D units, grid-stride over tiles
template <int D, int Hint> __global__ void tiles(uint4* d, const uint4* s, std::size_t n) {
  const std::size_t tile = std::size_t{blockDim.x} * D;
  for (std::size_t start = blockIdx.x * tile; start < n; start += gridDim.x * tile)
    team_copy<D, Hint>(threadIdx.x, blockDim.x, d + start, s + start, std::min(tile, n - start));
}
template <int D, int Hint> __global__ void warp_tiles(uint4* d, const uint4* s, std::size_t n) {
  const std::size_t tile = 32 * D, warp = (blockIdx.x * std::size_t{blockDim.x} + threadIdx.x) / 32, warps = std::size_t{gridDim.x} * blockDim.x / 32;
  for (std::size_t start = warp * tile; start < n; start += warps * tile)
    team_copy<D, Hint>(threadIdx.x % 32, 32, d + start, s + start, std::min(tile, n - start));
}
// even slab per block
template <int D, int Hint> __global__ void slab(uint4* d, const uint4* s, std::size_t n) {
  const std::size_t per = (n + gridDim.x - 1) / gridDim.x;
  const std::size_t first = std::min(n, blockIdx.x * per);
  const std::size_t last = std::min(n, first + per);
  team_copy<D, Hint>(threadIdx.x, blockDim.x, d + first, s + first, last - first);
}


// TMA bulk copies through a ring of shared-memory stages: one thread per block issues them.
__device__ __forceinline__ unsigned smem_addr(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
template <int Chunk, int Stages> __global__ void tma_copy(uint4* d, const uint4* s, std::size_t n) {
  extern __shared__ __align__(128) unsigned char ring[];
  __shared__ __align__(8) unsigned long long bar[Stages];
  if (threadIdx.x != 0) return;
  const std::size_t bytes = n * 16, chunks = (bytes + Chunk - 1) / Chunk;
  for (int k = 0; k < Stages; ++k) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_addr(&bar[k])));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  const char* src = reinterpret_cast<const char*>(s);
  char* dst = reinterpret_cast<char*>(d);
  std::size_t mine = chunks > blockIdx.x ? (chunks - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  auto chunk_of = [&](std::size_t j) { return blockIdx.x + j * gridDim.x; };
  auto load = [&](std::size_t j) {
    const std::size_t c = chunk_of(j); const int stage = j % Stages;
    const unsigned len = static_cast<unsigned>(bytes - c * Chunk < Chunk ? bytes - c * Chunk : Chunk);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(smem_addr(&bar[stage])), "r"(len) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(smem_addr(ring + stage * Chunk)), "l"(src + c * Chunk), "r"(len), "r"(smem_addr(&bar[stage])) : "memory");
  };
  for (std::size_t j = 0; j < mine && j < Stages; ++j) load(j);
  for (std::size_t j = 0; j < mine; ++j) {
    const int stage = j % Stages; const unsigned parity = (j / Stages) & 1;
    asm volatile("{ .reg .pred p; W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1; @!p bra W; }" :: "r"(smem_addr(&bar[stage])), "r"(parity) : "memory");
    const std::size_t c = chunk_of(j);
    const unsigned len = static_cast<unsigned>(bytes - c * Chunk < Chunk ? bytes - c * Chunk : Chunk);
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" :: "l"(dst + c * Chunk), "r"(smem_addr(ring + stage * Chunk)), "r"(len) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
    if (j >= 1 && j - 1 + Stages < mine) load(j - 1 + Stages);
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

__global__ void fill(unsigned* p, std::size_t n) { for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += std::size_t{gridDim.x} * blockDim.x) p[i] = static_cast<unsigned>(i * 2654435761u) ^ 0x9e3779b9u; }
struct V { std::string name; std::function<void(uint4*, const uint4*, std::size_t, int, int, cudaStream_t)> go; bool kernel; int smem = 0; };

int main() {
  int sms = 0;
#define OPTIN(C,S) CK(cudaFuncSetAttribute(tma_copy<C,S>, cudaFuncAttributeMaxDynamicSharedMemorySize, C*S))
 CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const std::size_t pool = std::size_t{2} << 30;
  char *a, *b; CK(cudaMalloc(&a, pool)); CK(cudaMalloc(&b, pool));
  fill<<<1024, 256>>>((unsigned*)a, pool / 4); CK(cudaDeviceSynchronize()); CK(cudaMemset(b, 0, pool));
  cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
#define KV(NAME, K) V{NAME, [](uint4* d, const uint4* s, std::size_t n, int g, int t, cudaStream_t q) { K<<<g, t, 0, q>>>(d, s, n); }, true}
#define TV(C, S) V{"tma " #C "x" #S, [](uint4* d, const uint4* s, std::size_t n, int g, int t, cudaStream_t q) { tma_copy<C, S><<<g, 32, C * S, q>>>(d, s, n); }, true, C * S}
  OPTIN(8192,8); OPTIN(16384,4); OPTIN(16384,8); OPTIN(32768,4); OPTIN(32768,6); OPTIN(65536,3);
  std::vector<V> vs = {
    {"cudaMemcpy", [](uint4* d, const uint4* s, std::size_t n, int, int, cudaStream_t q) { CK(cudaMemcpyAsync(d, s, n * 16, cudaMemcpyDeviceToDevice, q)); }, false},
    KV("plain", plain),
    KV("grid_team D4", (grid_team<4, 0>)),
    KV("grid_team D8", (grid_team<8, 0>)),
    KV("tiles D4 (bench block)", (tiles<4, 0>)),
    KV("warp_tiles D4", (warp_tiles<4, 0>)), KV("warp_tiles D8", (warp_tiles<8, 0>)), KV("warp_tiles D8 nc+cs", (warp_tiles<8, 2>)),
  };
  for (std::size_t shift : {std::size_t{0}, std::size_t{2048}, std::size_t{65536} + 4096}) {
  std::printf("\n##### dst shifted by %zu bytes\n", shift);
  char* b0 = b; b = b0 + shift;
  for (std::size_t bytes : {std::size_t{64} << 20, std::size_t{256} << 20}) {
    const std::size_t n = bytes / 16, slots = (pool - (1u << 20)) / bytes;
    const int calls = (int)std::max<std::size_t>(1, (256u << 20) / bytes);
    std::printf("\n== %zu MiB (calls/sample %d)\n", bytes >> 20, calls);
    double memcpy_gbps = 0;
    for (auto& v : vs) {
      double best = 0; std::string bestcfg;
      std::string line;
      for (int threads : {256, 512, 1024}) for (int per : {1, 2, 3, 4, 8}) {
        if (!v.kernel && (threads != 256 || per != 1)) continue;
        if (threads * per > 2048) continue;
        if (v.smem && (threads != 256 || per > 4 || per * (v.smem + 1024) > 228 * 1024)) continue;
        const int grid = per * sms;
        // check
        CK(cudaMemsetAsync(b, 0, bytes, st));
        v.go((uint4*)b, (const uint4*)a, n, grid, threads, st);
        CK(cudaGetLastError());
        if (v.kernel && bytes <= (64u << 20)) { static std::vector<char> h1, h2; h1.resize(bytes); h2.resize(bytes); CK(cudaMemcpy(h1.data(), a, bytes, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(h2.data(), b, bytes, cudaMemcpyDeviceToHost)); if (h1 != h2) std::printf("WRONG %s %dx%d\n", v.name.c_str(), threads, per); }
        std::vector<float> ms;
        long call = 0;
        for (int w = 0; w < 3; ++w) v.go((uint4*)(b + (call++ % slots) * bytes), (const uint4*)(a + (call % slots) * bytes), n, grid, threads, st);
        for (int smp = 0; smp < 31; ++smp) {
          CK(cudaEventRecord(e0, st));
          for (int c = 0; c < calls; ++c, ++call) v.go((uint4*)(b + (call % slots) * bytes), (const uint4*)(a + (call % slots) * bytes), n, grid, threads, st);
          CK(cudaEventRecord(e1, st)); CK(cudaEventSynchronize(e1));
          float t; CK(cudaEventElapsedTime(&t, e0, e1)); ms.push_back(t / calls);
        }
        std::sort(ms.begin(), ms.end());
        const double gbps = bytes / (ms[15] * 1e-3) / 1e9;
        char cell[64]; std::snprintf(cell, sizeof cell, " %dx%d:%.0f", threads, per, gbps); line += cell;
        if (gbps > best) { best = gbps; bestcfg = cell; }
      }
      if (!v.kernel) memcpy_gbps = best;
      std::printf("%-24s best %6.0f GB/s ratio %.3f [%s]\n   %s\n", v.name.c_str(), best, best / memcpy_gbps, bestcfg.c_str(), line.c_str());
    }
  }
  b = b0; }
  return 0;
}
