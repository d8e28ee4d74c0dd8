// 03_get_put — move whole tiles between ranks, the block cooperating.
//
// Teaches: iris::device::put(group, ctx, dst, src, count, to) copies `count` local elements to
// rank `to`'s copy of `dst`; iris::device::get(group, ctx, dst, src, count, from) copies rank
// `from`'s copy of `src` into local `dst`. The first argument says who cooperates
// (iris::thread{}, iris::warp{}, iris::block{}, iris::grid{}): every member calls with the same
// arguments and the call shares the elements out, in 16-byte vectors with several in flight per
// thread. A tile per block per call is the usual shape: translate once, move a lot.
//
// Every rank pushes its numbers into the next rank's `inbox` (put) and pulls the previous rank's
// numbers into its own `pulled` (get), one tile per block at a time; after a barrier both hold
// the previous rank's numbers. Then it times the kernel.
//
//   iris-run -n 2 ./example_03_get_put
#include <cstdio>
#include <vector>

#include "common/example.hpp"
#include "iris/iris.hpp"

namespace {

constexpr std::size_t kTile = 16384;  // ints per block and call: 64 KiB

__global__ void push_and_pull(const __grid_constant__ iris::device::Context ctx, int* inbox,
                              int* pulled, const int* data, std::size_t count) {
  const int next = (ctx.rank() + 1) % ctx.world_size();
  const int previous = (ctx.rank() + ctx.world_size() - 1) % ctx.world_size();
  for (std::size_t start = blockIdx.x * kTile; start < count; start += gridDim.x * kTile) {
    const std::size_t n = count - start < kTile ? count - start : kTile;
    iris::device::put(iris::block{}, ctx, inbox + start, data + start, n, next);
    iris::device::get(iris::block{}, ctx, pulled + start, data + start, n, previous);
  }
}

}  // namespace

int main() {
  if (!example::gpu_visible("03_get_put")) return iris::examples::kNoDeviceExitCode;
  try {
    auto ctx = iris::Context::from_env();
    constexpr std::size_t kCount = std::size_t{1} << 24;  // ints: 64 MiB per rank
    const int previous = (ctx.rank() + ctx.world_size() - 1) % ctx.world_size();
    auto data = ctx.arange<int>(kCount, ctx.rank() << 24);  // rank r holds r * 2^24 + i
    auto inbox = ctx.zeros<int>(kCount);
    auto pulled = ctx.zeros<int>(kCount);

    auto exchange = [&] {
      push_and_pull<<<2 * example::sm_count(), 512>>>(ctx.device(), inbox.data(), pulled.data(),
                                                      data.data(), kCount);
    };
    exchange();
    IRIS_CUDA_CHECK(cudaGetLastError());
    ctx.barrier();  // the puts into this rank's inbox are done and visible
    const std::vector<int> pushed_here = inbox.to_host();
    const std::vector<int> pulled_here = pulled.to_host();
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < kCount; ++i) {
      const int expected = static_cast<int>((previous << 24) + i);
      wrong += (pushed_here[i] != expected) + (pulled_here[i] != expected);
    }
    if (wrong != 0) {
      std::printf("rank %d: %zu of %zu values from rank %d are WRONG\n", ctx.rank(), wrong,
                  2 * kCount, previous);
      return 1;
    }

    ctx.barrier();  // everyone has checked before anyone writes again
    const double ms = example::median_ms(nullptr, {}, [&](long) { exchange(); });
    std::printf("rank %d: put %zu MiB and got %zu MiB, all correct: %.0f GB/s (both counted)\n",
                ctx.rank(), kCount * sizeof(int) >> 20, kCount * sizeof(int) >> 20,
                example::gb_per_s(2.0 * kCount * sizeof(int), ms));
    return 0;
  } catch (const iris::Error& error) {
    std::fprintf(stderr, "03_get_put: %s\n", error.what());
    return iris::examples::exit_code(error);
  }
}
