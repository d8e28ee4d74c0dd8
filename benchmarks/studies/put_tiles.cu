// Study: which tile shape makes the device API's bulk moves fastest, and what the reference is.
// Not a benchmark the check script runs every time: a sweep to rerun when the mover, the grid
// shapes of rma_bandwidth or the GPU change. Its findings are in docs/benchmarks.md.
//
//   iris-run -n 2 ./study_put_tiles [--groups block,warp,thread] [--threads 128,256,512,1024]
//                                   [--vectors 1,2,4] [--ops put,copy] [--mib 64,256,1024]
//                                   [--samples 51] [--persistent]
//   ./study_put_tiles --engine
//
// Default mode (two ranks): rank 0 moves --mib MiB into rank 1's heap with one tile per group and
// as many groups as tiles (the loop in the kernel runs once), for every combination of group,
// threads per block and 16-byte vectors per member; each row is checked once, then timed against
// cudaMemcpy D2D of the same size, the two in turn (paired ratios, median of --samples).
// --persistent adds the older shape: 32 KiB tiles dealt round-robin to one 512-thread block per
// SM, through the library and written by hand, and a plain grid-stride 16-byte copy kernel.
//
// --engine (one process, no Iris context): is cudaMemcpy device-to-device on this GPU a copy
// engine or a kernel on the SMs? A 256 MiB copy is queued on a second stream while a kernel holds
// every thread slot of every SM; a copy engine finishes beside it, a kernel has to wait.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "iris/iris.hpp"
#include "report.hpp"

namespace {

/// The comma-separated numbers after `flag` (`--threads 256,512`), or `fallback`.
std::vector<long> list_arg(int argc, char** argv, const std::string& flag,
                           std::vector<long> fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (argv[i] != flag) continue;
    std::vector<long> values;
    std::stringstream items(argv[i + 1]);
    for (std::string item; std::getline(items, item, ',');)
      values.push_back(std::atol(item.c_str()));
    return values;
  }
  return fallback;
}

/// The comma-separated words after `flag`, or `fallback`.
std::vector<std::string> words_arg(int argc, char** argv, const std::string& flag,
                                   std::vector<std::string> fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (argv[i] != flag) continue;
    std::vector<std::string> values;
    std::stringstream items(argv[i + 1]);
    for (std::string item; std::getline(items, item, ',');) values.push_back(item);
    return values;
  }
  return fallback;
}

bool has_flag(int argc, char** argv, const std::string& flag) {
  for (int i = 1; i < argc; ++i)
    if (argv[i] == flag) return true;
  return false;
}

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

void engine_test() {
  const int sms = example::sm_count();
  const std::size_t bytes = std::size_t{256} << 20;
  char *a, *b;
  IRIS_CUDA_CHECK(cudaMalloc(&a, bytes));
  IRIS_CUDA_CHECK(cudaMalloc(&b, bytes));
  IRIS_CUDA_CHECK(cudaMemset(a, 1, bytes));
  cudaStream_t busy, other;
  IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&busy, cudaStreamNonBlocking));
  IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  cudaEvent_t start, spin_end, copy_end;
  for (cudaEvent_t* e : {&start, &spin_end, &copy_end}) IRIS_CUDA_CHECK(cudaEventCreate(e));
  int clock_khz = 0;
  IRIS_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  const long long cycles = 2LL * clock_khz;  // about 2 ms
  auto once = [&](const char* what, auto enqueue_copy) {
    IRIS_CUDA_CHECK(cudaDeviceSynchronize());
    IRIS_CUDA_CHECK(cudaEventRecord(start, busy));
    spin<<<2 * sms, 1024, 0, busy>>>(cycles);  // 2048 threads on every SM: no slot left
    IRIS_CUDA_CHECK(cudaEventRecord(spin_end, busy));
    IRIS_CUDA_CHECK(cudaStreamWaitEvent(other, start));
    enqueue_copy();
    IRIS_CUDA_CHECK(cudaEventRecord(copy_end, other));
    IRIS_CUDA_CHECK(cudaDeviceSynchronize());
    float spin_ms = 0, copy_done_ms = 0;
    IRIS_CUDA_CHECK(cudaEventElapsedTime(&spin_ms, start, spin_end));
    IRIS_CUDA_CHECK(cudaEventElapsedTime(&copy_done_ms, start, copy_end));
    std::printf("%-30s spinner ends at %.3f ms, copy ends at %.3f ms: %s\n", what, spin_ms,
                copy_done_ms,
                copy_done_ms < spin_ms ? "ran beside the spinner" : "waited for the spinner");
  };
  for (int round = 0; round < 3; ++round) {
    once("cudaMemcpyAsync D2D 256 MiB",
         [&] { IRIS_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, other)); });
    once("copy kernel 256 MiB", [&] {
      plain_copy<<<3 * sms, 512, 0, other>>>(reinterpret_cast<uint4*>(b),
                                             reinterpret_cast<const uint4*>(a), bytes / 16);
    });
  }
  example::Repeats repeats;
  const double memcpy_ms = example::median_ms(other, repeats, [&](long) {
    IRIS_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, other));
  });
  const double kernel_ms = example::median_ms(other, repeats, [&](long) {
    plain_copy<<<3 * sms, 512, 0, other>>>(reinterpret_cast<uint4*>(b),
                                           reinterpret_cast<const uint4*>(a), bytes / 16);
  });
  std::printf("alone: cudaMemcpy %.1f us (%.0f GB/s), copy kernel %.1f us (%.0f GB/s)\n",
              memcpy_ms * 1e3, example::gb_per_s(bytes, memcpy_ms), kernel_ms * 1e3,
              example::gb_per_s(bytes, kernel_ms));
  for (cudaEvent_t e : {start, spin_end, copy_end}) IRIS_CUDA_CHECK(cudaEventDestroy(e));
  IRIS_CUDA_CHECK(cudaStreamDestroy(busy));
  IRIS_CUDA_CHECK(cudaStreamDestroy(other));
  IRIS_CUDA_CHECK(cudaFree(a));
  IRIS_CUDA_CHECK(cudaFree(b));
}

enum class Op { kPut, kCopy };

/// One tile per group (block, warp or thread), as many groups as tiles: the loop runs once.
template <class G, int kThreads, Op kOp>
__global__ void __launch_bounds__(kThreads)
    one_tile(const __grid_constant__ iris::device::Context ctx, float* dst, const float* src,
             std::size_t count, int peer, std::size_t tile) {
  const std::size_t thread = blockIdx.x * std::size_t{kThreads} + threadIdx.x;
  std::size_t group = thread;
  if constexpr (std::is_same_v<G, iris::block>) group = blockIdx.x;
  if constexpr (std::is_same_v<G, iris::warp>) group = thread / 32;
  const std::size_t start = group * tile;
  if (start >= count) return;
  const std::size_t n = std::min(tile, count - start);
  if constexpr (kOp == Op::kPut) {
    iris::device::put(G{}, ctx, dst + start, src + start, n, peer);
  } else {
    iris::device::copy(G{}, ctx, dst + start, src + start, n, peer, ctx.rank());
  }
}

/// Tiles of `tile` floats dealt round-robin to the grid's blocks, through the library or by hand.
template <bool kLibrary>
__global__ void __launch_bounds__(512)
    persistent_tiles(const __grid_constant__ iris::device::Context ctx, float* dst,
                     const float* src, std::size_t count, int peer, std::size_t tile) {
  for (std::size_t start = blockIdx.x * tile; start < count; start += gridDim.x * tile) {
    const std::size_t n = std::min(tile, count - start);
    if constexpr (kLibrary) {
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

using Launch = std::function<void(float* dst, const float* src, std::size_t count, cudaStream_t)>;

struct Row {
  std::string name;
  Launch launch;
};

template <class G>
const char* group_name() {
  if constexpr (std::is_same_v<G, iris::block>) return "block";
  if constexpr (std::is_same_v<G, iris::warp>) return "warp";
  return "thread";
}

/// A row for one (group, threads, op) and `vectors` 16-byte vectors per member.
template <class G, int kThreads, Op kOp>
Row one_tile_row(const iris::device::Context& dev, int peer, long vectors) {
  const std::size_t members = std::is_same_v<G, iris::block>  ? kThreads
                              : std::is_same_v<G, iris::warp> ? 32
                                                              : 1;
  const std::size_t tile = members * static_cast<std::size_t>(vectors) * 4;  // floats
  const std::size_t groups_per_block = kThreads / members;
  char name[96];
  std::snprintf(name, sizeof name, "%s<%s>, %zu B tiles, %d threads/block",
                kOp == Op::kPut ? "put" : "copy", group_name<G>(), tile * sizeof(float), kThreads);
  return {name, [=](float* d, const float* s, std::size_t n, cudaStream_t q) {
            const std::size_t groups = (n + tile - 1) / tile;
            const auto blocks =
                static_cast<unsigned>((groups + groups_per_block - 1) / groups_per_block);
            one_tile<G, kThreads, kOp><<<blocks, kThreads, 0, q>>>(dev, d, s, n, peer, tile);
          }};
}

template <class G, Op kOp>
bool add_threads(std::vector<Row>& rows, const iris::device::Context& dev, int peer, long threads,
                 long vectors) {
  switch (threads) {
    case 128:
      rows.push_back(one_tile_row<G, 128, kOp>(dev, peer, vectors));
      return true;
    case 256:
      rows.push_back(one_tile_row<G, 256, kOp>(dev, peer, vectors));
      return true;
    case 512:
      rows.push_back(one_tile_row<G, 512, kOp>(dev, peer, vectors));
      return true;
    case 1024:
      rows.push_back(one_tile_row<G, 1024, kOp>(dev, peer, vectors));
      return true;
    default:
      return false;
  }
}

template <Op kOp>
bool add_group(std::vector<Row>& rows, const iris::device::Context& dev, int peer,
               const std::string& group, long threads, long vectors) {
  if (group == "block") return add_threads<iris::block, kOp>(rows, dev, peer, threads, vectors);
  if (group == "warp") return add_threads<iris::warp, kOp>(rows, dev, peer, threads, vectors);
  if (group == "thread") return add_threads<iris::thread, kOp>(rows, dev, peer, threads, vectors);
  return false;
}

int tiles_study(int argc, char** argv) {
  const int samples = static_cast<int>(example::number_arg(argc, argv, "--samples", 51));
  const auto groups = words_arg(argc, argv, "--groups", {"block", "warp", "thread"});
  const auto threads = list_arg(argc, argv, "--threads", {128, 256, 512, 1024});
  const auto vectors = list_arg(argc, argv, "--vectors", {1, 2, 4});
  const auto ops = words_arg(argc, argv, "--ops", {"put"});
  const auto mibs = list_arg(argc, argv, "--mib", {64, 256, 1024});
  const std::size_t largest = static_cast<std::size_t>(*std::max_element(mibs.begin(), mibs.end()))
                              << 20;

  iris::ContextOptions options;
  options.heap_size = 2 * largest + (std::size_t{64} << 20);
  auto ctx = iris::Context::from_env(options);
  if (ctx.world_size() < 2)
    throw iris::Error(iris::Errc::kInvalidArgument,
                      "study_put_tiles needs two ranks (iris-run -n 2), or --engine");
  constexpr int kPeer = 1;
  // Sizes rotate through a pool of at least 1 GiB so that repeated calls read HBM, not L2.
  const std::size_t pool_floats = std::max(largest, std::size_t{1} << 30) / sizeof(float);
  auto src = ctx.uniform<float>(pool_floats, -1.0f, 1.0f, 1000 + ctx.rank());
  auto dst = ctx.empty<float>(pool_floats);
  if (ctx.rank() != 0) {
    ctx.barrier();
    return 0;
  }
  const iris::device::Context dev = ctx.device();
  const int sms = example::sm_count();
  float* const dst_local = dst.data();
  const float* const src_local = src.data();
  float* const peer_dst = dst.on(kPeer);
  const std::ptrdiff_t to_peer = peer_dst - dst_local;

  std::vector<Row> rows;
  for (const std::string& op : ops)
    for (const std::string& group : groups)
      for (const long t : threads)
        for (const long v : vectors) {
          const bool known = op == "put"    ? add_group<Op::kPut>(rows, dev, kPeer, group, t, v)
                             : op == "copy" ? add_group<Op::kCopy>(rows, dev, kPeer, group, t, v)
                                            : false;
          if (!known || v <= 0)
            throw iris::Error(iris::Errc::kInvalidArgument,
                              "study_put_tiles: no row for op '" + op + "', group '" + group +
                                  "', " + std::to_string(t) + " threads, " + std::to_string(v) +
                                  " vectors (ops: put, copy; groups: block, warp, thread; "
                                  "threads: 128, 256, 512, 1024; vectors >= 1)");
        }
  if (has_flag(argc, argv, "--persistent")) {
    rows.push_back({"put<block>, 32 KiB tiles round-robin, 1 block/SM",
                    [=](float* d, const float* s, std::size_t n, cudaStream_t q) {
                      persistent_tiles<true><<<sms, 512, 0, q>>>(dev, d, s, n, kPeer, 8192);
                    }});
    rows.push_back(
        {"the same tiles by hand", [=](float* d, const float* s, std::size_t n, cudaStream_t q) {
           persistent_tiles<false><<<sms, 512, 0, q>>>(dev, d, s, n, kPeer, 8192);
         }});
    rows.push_back({"plain 16-byte grid-stride kernel, 3 blocks/SM",
                    [=](float* d, const float* s, std::size_t n, cudaStream_t q) {
                      plain_copy<<<3 * sms, 512, 0, q>>>(reinterpret_cast<uint4*>(d + to_peer),
                                                         reinterpret_cast<const uint4*>(s), n / 4);
                    }});
  }

  cudaStream_t stream;
  IRIS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  unsigned long long* wrong;
  IRIS_CUDA_CHECK(cudaMalloc(&wrong, sizeof *wrong));
  std::size_t calls = 0;
  int failures = 0;
  for (const long mib : mibs) {
    const std::size_t bytes = static_cast<std::size_t>(mib) << 20;
    const std::size_t n = bytes / sizeof(float), slots = pool_floats / n;
    example::Repeats one;
    one.samples = 1;
    one.warmup = 1;
    one.calls_per_sample = static_cast<int>(std::max<std::size_t>(1, (256u << 20) / bytes));
    auto time_one = [&](auto&& enqueue) {
      return example::time_calls_ms(stream, one, [&](long) { enqueue(calls++ % slots * n); })
          .front();
    };
    std::printf("\n== %ld MiB: paired ratio to cudaMemcpy D2D (median of %d), GB/s median\n", mib,
                samples);
    for (const Row& row : rows) {
      IRIS_CUDA_CHECK(cudaMemsetAsync(peer_dst, 0xff, bytes, stream));
      row.launch(dst_local, src_local, n, stream);
      IRIS_CUDA_CHECK(cudaGetLastError());
      IRIS_CUDA_CHECK(cudaMemsetAsync(wrong, 0, sizeof *wrong, stream));
      using Word = unsigned long long;
      iris::bench::count_mismatches<Word><<<2 * sms, 256, 0, stream>>>(
          reinterpret_cast<const Word*>(peer_dst), reinterpret_cast<const Word*>(src_local),
          bytes / sizeof(Word), 0, Word{0}, wrong);
      unsigned long long bad = 0;
      IRIS_CUDA_CHECK(cudaMemcpyAsync(&bad, wrong, sizeof bad, cudaMemcpyDeviceToHost, stream));
      IRIS_CUDA_CHECK(cudaStreamSynchronize(stream));
      failures += bad != 0;
      std::vector<double> ratios, ms, ref_ms;
      for (int k = 0; k < samples; ++k) {
        const double ref = time_one([&](std::size_t off) {
          IRIS_CUDA_CHECK(cudaMemcpyAsync(dst_local + off, src_local + off, bytes,
                                          cudaMemcpyDeviceToDevice, stream));
        });
        const double mine = time_one(
            [&](std::size_t off) { row.launch(dst_local + off, src_local + off, n, stream); });
        ratios.push_back(ref / mine);
        ms.push_back(mine);
        ref_ms.push_back(ref);
      }
      const auto r = example::summarize(ratios);
      std::printf(
          "%-56s ratio %.3f [%.3f..%.3f]  %5.0f GB/s  (cudaMemcpy %5.0f)%s\n", row.name.c_str(),
          r.median, r.min, r.max, example::gb_per_s(bytes, example::summarize(ms).median),
          example::gb_per_s(bytes, example::summarize(ref_ms).median), bad ? "  WRONG" : "");
    }
  }
  IRIS_CUDA_CHECK(cudaFree(wrong));
  IRIS_CUDA_CHECK(cudaStreamDestroy(stream));
  ctx.barrier();
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (!example::gpu_visible("study_put_tiles")) return 0;
  try {
    if (has_flag(argc, argv, "--engine")) {
      engine_test();
      return 0;
    }
    return tiles_study(argc, argv);
  } catch (const iris::Error& error) {
    std::fprintf(stderr, "study_put_tiles: %s\n", error.what());
    return 1;
  }
}
