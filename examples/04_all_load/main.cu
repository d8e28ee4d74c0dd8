// 04_all_load — gather every rank's data with loads: an all-gather in one small kernel.
//
// Teaches: the rank is a run-time argument of iris::device::load, so one kernel reads all ranks
// (world size is never a template parameter); with the heap in one flat window, "which rank" is
// only an offset. This rank's own slice goes through the same call (translating to yourself is
// the identity). Each rank walks the ranks starting from itself, so that the ranks do not all
// read rank 0 first.
//
// Rank r's `gathered` ends up holding every rank's `data`, rank by rank. The check covers every
// slice; then the gather is timed (bytes counted: everything that lands in `gathered`).
//
//   iris-run -n 4 ./example_04_all_load
#include <cstdio>
#include <vector>

#include "common/example.hpp"
#include "iris/iris.hpp"

namespace {

__global__ void gather_by_loads(const __grid_constant__ iris::device::Context ctx, int4* gathered,
                                const int4* data, std::size_t vectors_per_rank) {
  for (int k = 0; k < ctx.world_size(); ++k) {
    const int from = (ctx.rank() + k) % ctx.world_size();
    int4* slice = gathered + from * vectors_per_rank;
    for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < vectors_per_rank;
         i += std::size_t{gridDim.x} * blockDim.x) {
      slice[i] = iris::device::load(ctx, data + i, from);
    }
  }
}

}  // namespace

int main() {
  if (!example::gpu_visible("04_all_load")) return iris::examples::kNoDeviceExitCode;
  try {
    auto ctx = iris::Context::from_env();
    constexpr std::size_t kCount = std::size_t{1} << 22;  // ints per rank: 16 MiB
    const auto world = static_cast<std::size_t>(ctx.world_size());
    auto data = ctx.arange<int>(kCount, ctx.rank() << 24);  // rank r holds r * 2^24 + i
    auto gathered = ctx.zeros<int>(world * kCount);

    auto gather = [&] {
      gather_by_loads<<<2 * example::sm_count(), 512>>>(
          ctx.device(), reinterpret_cast<int4*>(gathered.data()),
          reinterpret_cast<const int4*>(data.data()), kCount / 4);
    };
    gather();
    IRIS_CUDA_CHECK(cudaGetLastError());
    const std::vector<int> got = gathered.to_host();
    // Element r * kCount + i came from rank r, its element i.
    if (!example::check(ctx.rank(), "gathered values", got, [&](std::size_t at) {
          return static_cast<int>(((at / kCount) << 24) + at % kCount);
        }))
      return 1;

    ctx.barrier();
    const double ms = example::median_ms(nullptr, {}, [&](long) { gather(); });
    std::printf("rank %d: gathered %zu x %zu MiB, all correct: %.0f GB/s\n", ctx.rank(), world,
                kCount * sizeof(int) >> 20, example::gb_per_s(world * kCount * sizeof(int), ms));
    return 0;
  } catch (const iris::Error& error) {
    std::fprintf(stderr, "04_all_load: %s\n", error.what());
    return iris::examples::exit_code(error);
  }
}
