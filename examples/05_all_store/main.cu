// 05_all_store — send this rank's data to every rank with stores: the push form of all-gather.
//
// Teaches: iris::device::store to a run-time rank, one kernel for any world size; each rank
// writes only its own slice of every rank's `gathered`, so no two ranks write the same bytes
// and nothing needs atomics; ctx.barrier() then publishes all of it. Each rank walks the ranks
// starting from itself, so that the ranks do not all write to rank 0 first. Unlike a load
// (04_all_load), a store waits for no reply, so pushing keeps more bytes in flight per thread.
//
// Rank r's `gathered` ends up holding every rank's `data`, rank by rank. The check covers every
// slice; then the scatter is timed (bytes counted: everything this rank stores).
//
//   iris-run -n 4 ./example_05_all_store
#include <cstdio>
#include <vector>

#include "common/example.hpp"
#include "iris/iris.hpp"

namespace {

__global__ void scatter_by_stores(const __grid_constant__ iris::device::Context ctx, int4* gathered,
                                  const int4* data, std::size_t vectors_per_rank) {
  int4* my_slice = gathered + ctx.rank() * vectors_per_rank;  // the same slice on every rank
  for (int k = 0; k < ctx.world_size(); ++k) {
    const int to = (ctx.rank() + k) % ctx.world_size();
    for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < vectors_per_rank;
         i += std::size_t{gridDim.x} * blockDim.x) {
      iris::device::store(ctx, my_slice + i, data[i], to);
    }
  }
}

}  // namespace

int main() {
  if (!example::gpu_visible("05_all_store")) return iris::examples::kNoDeviceExitCode;
  try {
    auto ctx = iris::Context::from_env();
    constexpr std::size_t kCount = std::size_t{1} << 22;  // ints per rank: 16 MiB
    const auto world = static_cast<std::size_t>(ctx.world_size());
    auto data = ctx.arange<int>(kCount, ctx.rank() << 24);  // rank r holds r * 2^24 + i
    auto gathered = ctx.zeros<int>(world * kCount);

    auto scatter = [&] {
      scatter_by_stores<<<2 * example::sm_count(), 512>>>(
          ctx.device(), reinterpret_cast<int4*>(gathered.data()),
          reinterpret_cast<const int4*>(data.data()), kCount / 4);
    };
    scatter();
    IRIS_CUDA_CHECK(cudaGetLastError());
    ctx.barrier();  // every rank's stores are done and visible
    const std::vector<int> got = gathered.to_host();
    // Element r * kCount + i came from rank r, its element i.
    if (!example::check(ctx.rank(), "received values", got, [&](std::size_t at) {
          return static_cast<int>(((at / kCount) << 24) + at % kCount);
        }))
      return 1;

    ctx.barrier();  // everyone has checked before anyone stores again
    const double ms = example::median_ms(nullptr, {}, [&](long) { scatter(); });
    std::printf("rank %d: stored %zu MiB into each of %zu ranks, all correct: %.0f GB/s\n",
                ctx.rank(), kCount * sizeof(int) >> 20, world,
                example::gb_per_s(world * kCount * sizeof(int), ms));
    return 0;
  } catch (const iris::Error& error) {
    std::fprintf(stderr, "05_all_store: %s\n", error.what());
    return iris::examples::exit_code(error);
  }
}
