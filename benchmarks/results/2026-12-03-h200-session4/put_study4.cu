// One-off study (session 4): is the last round (a tail where some blocks idle) what keeps block
// put under 0.95 of cudaMemcpy at 64 MiB?  Same setting as put_study2/3.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "iris/iris.hpp"
#include "report.hpp"

namespace {

// kSplit 0: tiles of `tile` floats dealt round-robin to blocks (the benchmark's way).
// kSplit g > 0: whole rounds of such tiles, then the remainder cut in one equal piece per block,
//               pieces a multiple of g floats.
template <int kSplit, bool kLib>
__global__ void __launch_bounds__(512) move(const __grid_constant__ iris::device::Context ctx,
                                            float* dst, const float* src, std::size_t count,
                                            int peer, std::size_t tile) {
  auto one = [&](std::size_t start, std::size_t n) {
    if constexpr (kLib) {
      iris::device::put(iris::block{}, ctx, dst + start, src + start, n, peer);
    } else {
      // the same moves, no library: 16-byte vectors, four in flight per thread
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
  };
  const std::size_t round = std::size_t{gridDim.x} * tile;
  const std::size_t full = kSplit == 0 ? count : count / round * round;
  for (std::size_t start = blockIdx.x * tile; start < full; start += round)
    one(start, std::min(tile, count - start));
  if constexpr (kSplit > 0) {
    const std::size_t rest = count - full;
    const std::size_t piece = ((rest + gridDim.x - 1) / gridDim.x + kSplit - 1) / kSplit * kSplit;
    const std::size_t start = full + blockIdx.x * piece;
    if (start < count) one(start, std::min(piece, count - start));
  }
}

__global__ void plain_copy(uint4* dst, const uint4* src, std::size_t vectors) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < vectors;
       i += std::size_t{gridDim.x} * blockDim.x)
    dst[i] = src[i];
}

struct Config {
  std::string name;
  int blocks;
  std::function<void(float* d, const float* s, std::size_t n, cudaStream_t)> go;
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
  float* const dst_local = dst.data();
  const float* const src_local = src.data();
  float* const peer_dst = dst.on(kPeer);

  std::vector<Config> cs;
  for (const int blocks : {sms, 128, 2 * sms, 256}) {
    for (const std::size_t tile : {std::size_t{8192}, std::size_t{4096}}) {
      auto add = [&](const char* what, auto kernel) {
        char name[96];
        std::snprintf(name, sizeof name, "%s, %zu KiB tiles", what, tile * 4 / 1024);
        cs.push_back({name, blocks, [=](float* d, const float* s, std::size_t n, cudaStream_t q) {
                        kernel<<<blocks, 512, 0, q>>>(dev, d, s, n, kPeer, tile);
                      }});
      };
      add("lib put round-robin", move<0, true>);
      add("raw round-robin", move<0, false>);
      if (tile == 8192) {
        add("lib put tail in 512 B pieces", move<128, true>);
        add("lib put tail in 4 KiB pieces", move<1024, true>);
        add("raw tail in 4 KiB pieces", move<1024, false>);
      }
    }
  }
  for (const int per_sm : {3, 4})
    cs.push_back({"plain 16B kernel", per_sm * sms,
                  [=](float* d, const float* s, std::size_t n, cudaStream_t q) {
                    plain_copy<<<per_sm * sms, 512, 0, q>>>(
                        reinterpret_cast<uint4*>(d + (peer_dst - dst_local)),
                        reinterpret_cast<const uint4*>(s), n / 4);
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
      std::vector<double> ratios, ms;
      for (int k = 0; k < samples; ++k) {
        const double ref = time_one([&](std::size_t off) {
          IRIS_CUDA_CHECK(cudaMemcpyAsync(dst_local + off, src_local + off, bytes,
                                          cudaMemcpyDeviceToDevice, stream));
        });
        const double mine =
            time_one([&](std::size_t off) { c.go(dst_local + off, src_local + off, n, stream); });
        ratios.push_back(ref / mine);
        ms.push_back(mine);
      }
      const auto r = iris::bench::summarize(ratios);
      const double gbps = iris::bench::gb_per_s(bytes, iris::bench::summarize(ms).median);
      std::printf("%-36s %4d blocks  ratio %.3f  (%.0f GB/s)%s\n", c.name.c_str(), c.blocks,
                  r.median, gbps, bad ? "  WRONG" : "");
    }
  }
  ctx.barrier();
  return 0;
}
