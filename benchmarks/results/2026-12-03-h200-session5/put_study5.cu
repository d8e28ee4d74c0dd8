// One-off study (session 5): what is the reference?  Two questions.
//  1. Does cudaMemcpy D2D on the H200 run on a copy engine?  It is queued while a kernel holds
//     every thread slot of every SM; an SM-driven copy must wait for that kernel, an engine
//     need not.
//  2. Does MPS (needed to run several ranks on one GPU) cost SM copies what it does not cost
//     cudaMemcpy?  The same put kernels are timed against cudaMemcpy with and without MPS.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "iris/iris.hpp"
#include "report.hpp"

namespace {

__global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

__global__ void plain_copy(uint4* dst, const uint4* src, std::size_t vectors) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < vectors;
       i += std::size_t{gridDim.x} * blockDim.x)
    dst[i] = src[i];
}

// Question 1, one process, no iris: when does a 256 MiB copy queued behind a full-GPU spinner
// on another stream finish?
void engine_test() {
  int sms = 0;
  IRIS_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const std::size_t bytes = std::size_t{256} << 20;
  char *a, *b;
  IRIS_CUDA_CHECK(cudaMalloc(&a, bytes));
  IRIS_CUDA_CHECK(cudaMalloc(&b, bytes));
  IRIS_CUDA_CHECK(cudaMemset(a, 1, bytes));
  cudaStream_t busy, other;
  IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&busy, cudaStreamNonBlocking));
  IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  cudaEvent_t start, spin_end, copy_start, copy_end;
  for (cudaEvent_t* e : {&start, &spin_end, &copy_start, &copy_end})
    IRIS_CUDA_CHECK(cudaEventCreate(e));
  const long long cycles = 4'000'000;  // ~2 ms at ~1.98 GHz
  auto once = [&](const char* what, auto enqueue_copy) {
    IRIS_CUDA_CHECK(cudaDeviceSynchronize());
    IRIS_CUDA_CHECK(cudaEventRecord(start, busy));
    spin<<<2 * sms, 1024, 0, busy>>>(cycles);  // 2048 threads on every SM: no slot left
    IRIS_CUDA_CHECK(cudaEventRecord(spin_end, busy));
    IRIS_CUDA_CHECK(cudaStreamWaitEvent(other, start));
    IRIS_CUDA_CHECK(cudaEventRecord(copy_start, other));
    enqueue_copy();
    IRIS_CUDA_CHECK(cudaEventRecord(copy_end, other));
    IRIS_CUDA_CHECK(cudaDeviceSynchronize());
    float spin_ms = 0, copy_done_ms = 0;
    IRIS_CUDA_CHECK(cudaEventElapsedTime(&spin_ms, start, spin_end));
    IRIS_CUDA_CHECK(cudaEventElapsedTime(&copy_done_ms, start, copy_end));
    std::printf("%-34s spinner ends at %.3f ms, copy ends at %.3f ms: %s\n", what, spin_ms,
                copy_done_ms,
                copy_done_ms < spin_ms ? "ran beside the spinner" : "waited for the spinner");
  };
  for (int round = 0; round < 3; ++round) {
    once("cudaMemcpyAsync D2D 256 MiB", [&] {
      IRIS_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, other));
    });
    once("copy kernel 256 MiB", [&] {
      plain_copy<<<3 * sms, 512, 0, other>>>(reinterpret_cast<uint4*>(b),
                                            reinterpret_cast<const uint4*>(a), bytes / 16);
    });
  }
  // Alone, for scale.
  cudaStream_t s = other;
  iris::bench::Repeats r;
  r.samples = 21;
  const double memcpy_ms = iris::bench::median_ms(s, r, [&](long) {
    IRIS_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
  });
  const double kernel_ms = iris::bench::median_ms(s, r, [&](long) {
    plain_copy<<<3 * sms, 512, 0, s>>>(reinterpret_cast<uint4*>(b),
                                      reinterpret_cast<const uint4*>(a), bytes / 16);
  });
  std::printf("alone: cudaMemcpy %.1f us (%.0f GB/s), copy kernel %.1f us (%.0f GB/s)\n",
              memcpy_ms * 1e3, iris::bench::gb_per_s(bytes, memcpy_ms), kernel_ms * 1e3,
              iris::bench::gb_per_s(bytes, kernel_ms));
}

// Question 2 kernels.  Tiles of `tile` floats dealt round-robin to blocks (the benchmark's block
// pattern), through the library or by hand.
template <bool kLib>
__global__ void __launch_bounds__(512) tiles(const __grid_constant__ iris::device::Context ctx,
                                             float* dst, const float* src, std::size_t count,
                                             int peer, std::size_t tile) {
  for (std::size_t start = blockIdx.x * tile; start < count; start += gridDim.x * tile) {
    const std::size_t n = std::min(tile, count - start);
    if constexpr (kLib) {
      iris::device::put(iris::block{}, ctx, dst + start, src + start, n, peer);
    } else {
      auto* d = reinterpret_cast<uint4*>(ctx.translate(dst + start, peer));
      const auto* s = reinterpret_cast<const uint4*>(src + start);
      const std::size_t units = n / 4;
      for (std::size_t i = threadIdx.x; i < units; i += 4 * blockDim.x) {
        uint4 v[4];
#pragma unroll
        for (int k = 0; k < 4; ++k)
          if (i + k * blockDim.x < units) v[k] = s[i + k * blockDim.x];
#pragma unroll
        for (int k = 0; k < 4; ++k)
          if (i + k * blockDim.x < units) d[i + k * blockDim.x] = v[k];
      }
    }
  }
}

// Each warp takes chunks of 32 x 8 vectors (4 KiB) in turn, eight loads in flight per lane.
__global__ void warp_chunks(uint4* dst, const uint4* src, std::size_t vectors) {
  constexpr int kDepth = 8;
  const std::size_t lane = threadIdx.x % 32;
  const std::size_t warp = (blockIdx.x * std::size_t{blockDim.x} + threadIdx.x) / 32;
  const std::size_t warps = std::size_t{gridDim.x} * blockDim.x / 32;
  for (std::size_t start = warp * 32 * kDepth; start < vectors; start += warps * 32 * kDepth) {
    uint4 v[kDepth];
#pragma unroll
    for (int k = 0; k < kDepth; ++k)
      if (start + k * 32 + lane < vectors) v[k] = src[start + k * 32 + lane];
#pragma unroll
    for (int k = 0; k < kDepth; ++k)
      if (start + k * 32 + lane < vectors) dst[start + k * 32 + lane] = v[k];
  }
}

struct Config {
  std::string name;
  int blocks;
  std::function<void(float* d, const float* s, std::size_t n, cudaStream_t)> go;
};

void mps_test(int argc, char** argv) {
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
    return;
  }
  const iris::device::Context dev = ctx.device();
  const int sms = iris::bench::sm_count();
  float* const dst_local = dst.data();
  const float* const src_local = src.data();
  float* const peer_dst = dst.on(kPeer);
  const std::ptrdiff_t to_peer = peer_dst - dst_local;

  std::vector<Config> cs;
  for (const int blocks : {sms, 128}) {
    cs.push_back({"lib put<block>, 32 KiB tiles", blocks,
                  [=](float* d, const float* s, std::size_t n, cudaStream_t q) {
                    tiles<true><<<blocks, 512, 0, q>>>(dev, d, s, n, kPeer, 8192);
                  }});
    cs.push_back({"the same tiles by hand", blocks,
                  [=](float* d, const float* s, std::size_t n, cudaStream_t q) {
                    tiles<false><<<blocks, 512, 0, q>>>(dev, d, s, n, kPeer, 8192);
                  }});
  }
  for (const int per_sm : {1, 2, 4})
    cs.push_back({"warp chunks, 8 in flight", per_sm * sms,
                  [=](float* d, const float* s, std::size_t n, cudaStream_t q) {
                    warp_chunks<<<per_sm * sms, 512, 0, q>>>(
                        reinterpret_cast<uint4*>(d + to_peer), reinterpret_cast<const uint4*>(s),
                        n / 4);
                  }});
  cs.push_back({"plain 16B kernel", 3 * sms,
                [=](float* d, const float* s, std::size_t n, cudaStream_t q) {
                  plain_copy<<<3 * sms, 512, 0, q>>>(reinterpret_cast<uint4*>(d + to_peer),
                                                     reinterpret_cast<const uint4*>(s), n / 4);
                }});
  cs.push_back({"cudaMemcpy to the peer mapping", 0,
                [=](float* d, const float* s, std::size_t n, cudaStream_t q) {
                  IRIS_CUDA_CHECK(cudaMemcpyAsync(d + to_peer, s, n * sizeof(float),
                                                  cudaMemcpyDeviceToDevice, q));
                }});

  cudaStream_t stream;
  IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  unsigned long long* wrong;
  IRIS_CUDA_CHECK(cudaMalloc(&wrong, sizeof *wrong));
  std::size_t calls = 0;
  for (const std::size_t bytes : {std::size_t{64} << 20, std::size_t{256} << 20,
                                  std::size_t{1} << 30}) {
    const std::size_t n = bytes / sizeof(float), slots = pool_floats / n;
    iris::bench::Repeats one;
    one.samples = 1;
    one.warmup = 1;
    one.calls_per_sample = static_cast<int>(std::max<std::size_t>(1, (256u << 20) / bytes));
    auto time_one = [&](auto&& enqueue) {
      return iris::bench::time_calls_ms(stream, one, [&](long) {
               enqueue(calls++ % slots * n);
             }).front();
    };
    std::printf("\n== %zu MiB: paired ratio to cudaMemcpy D2D (median of %d), GB/s median\n",
                bytes >> 20, samples);
    for (const Config& c : cs) {
      IRIS_CUDA_CHECK(cudaMemsetAsync(peer_dst, 0xff, bytes, stream));
      c.go(dst_local, src_local, n, stream);
      IRIS_CUDA_CHECK(cudaGetLastError());
      IRIS_CUDA_CHECK(cudaMemsetAsync(wrong, 0, sizeof *wrong, stream));
      using Word = unsigned long long;
      iris::bench::count_mismatches<Word><<<2 * sms, 256, 0, stream>>>(
          reinterpret_cast<const Word*>(peer_dst), reinterpret_cast<const Word*>(src_local),
          bytes / sizeof(Word), 0, Word{0}, wrong);
      unsigned long long bad = 0;
      IRIS_CUDA_CHECK(cudaMemcpyAsync(&bad, wrong, sizeof bad, cudaMemcpyDeviceToHost, stream));
      IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
      std::vector<double> ratios, ms, ref_ms;
      for (int k = 0; k < samples; ++k) {
        const double ref = time_one([&](std::size_t off) {
          IRIS_CUDA_CHECK(cudaMemcpyAsync(dst_local + off, src_local + off, bytes,
                                          cudaMemcpyDeviceToDevice, stream));
        });
        const double mine =
            time_one([&](std::size_t off) { c.go(dst_local + off, src_local + off, n, stream); });
        ratios.push_back(ref / mine);
        ms.push_back(mine);
        ref_ms.push_back(ref);
      }
      const auto r = iris::bench::summarize(ratios);
      std::printf("%-34s %4d blocks  ratio %.3f [%.3f..%.3f]  %5.0f GB/s  (cudaMemcpy %5.0f)%s\n",
                  c.name.c_str(), c.blocks, r.median, r.min, r.max,
                  iris::bench::gb_per_s(bytes, iris::bench::summarize(ms).median),
                  iris::bench::gb_per_s(bytes, iris::bench::summarize(ref_ms).median),
                  bad ? "  WRONG" : "");
    }
  }
  ctx.barrier();
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc > 1 && std::strcmp(argv[1], "--engine") == 0)
    engine_test();
  else
    mps_test(argc, argv);
  return 0;
}
