// 01_load — read another rank's memory from inside a kernel.
//
// Teaches: iris::device::load(ctx, ptr, from) reads rank `from`'s copy of a symmetric object
// (`ptr` is this rank's copy: the same offset names the same object everywhere). It is a plain
// load through a translated pointer, so it costs what a local load costs plus one multiply-add,
// and it moves whatever type you give it: here 16-byte int4 vectors, the widest load a thread
// can issue. Data a peer wrote before a barrier (here: the fill) is safe to read.
//
// Every rank fills `data` with its own numbers, then copies the next rank's `data` into its own
// `received` and checks it; then it times that copy.
//
//   iris-run -n 2 ./example_01_load
#include <cstdio>
#include <vector>

#include "common/example.hpp"
#include "iris/iris.hpp"

namespace {

__global__ void load_from(const __grid_constant__ iris::device::Context ctx, int4* received,
                          const int4* data, std::size_t vectors, int from) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < vectors;
       i += std::size_t{gridDim.x} * blockDim.x) {
    received[i] = iris::device::load(ctx, data + i, from);
  }
}

}  // namespace

int main() {
  if (!example::gpu_visible("01_load")) return iris::examples::kNoDeviceExitCode;
  try {
    auto ctx = iris::Context::from_env();
    constexpr std::size_t kCount = std::size_t{1} << 24;  // ints: 64 MiB per rank
    const int from = (ctx.rank() + 1) % ctx.world_size();
    // Rank r holds r * 2^24 + i: exact integers that say which rank and element they came from.
    auto data = ctx.arange<int>(kCount, ctx.rank() << 24);
    auto received = ctx.zeros<int>(kCount);

    auto copy = [&] {
      load_from<<<2 * example::sm_count(), 512>>>(
          ctx.device(), reinterpret_cast<int4*>(received.data()),
          reinterpret_cast<const int4*>(data.data()), kCount / 4, from);
    };
    copy();
    IRIS_CUDA_CHECK(cudaGetLastError());
    const std::vector<int> got = received.to_host();
    if (!example::check(ctx.rank(), "values loaded from the next rank", got,
                        [&](std::size_t i) { return static_cast<int>((from << 24) + i); }))
      return 1;

    ctx.barrier();  // all ranks start timing together: their loads share the links (or the HBM)
    const double ms = example::median_ms(nullptr, {}, [&](long) { copy(); });
    std::printf("rank %d: loaded %zu MiB from rank %d, all correct: %.0f GB/s\n", ctx.rank(),
                kCount * sizeof(int) >> 20, from, example::gb_per_s(kCount * sizeof(int), ms));
    return 0;  // ~Context waits for every rank: no one unmaps `data` while a peer still reads it
  } catch (const iris::Error& error) {
    std::fprintf(stderr, "01_load: %s\n", error.what());
    return iris::examples::exit_code(error);
  }
}
