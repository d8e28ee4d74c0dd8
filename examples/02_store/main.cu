// 02_store — write into another rank's memory from inside a kernel.
//
// Teaches: iris::device::store(ctx, ptr, value, to) writes `value` to rank `to`'s copy of a
// symmetric object with a plain store. Plain stores promise nothing about *when* the peer sees
// them; here ctx.barrier() publishes them (it waits for this rank's kernels, then for every
// rank), so each rank reads its inbox only after the barrier. 03_get_put and 08_message_passing
// show how to publish data from inside the kernel instead.
//
// Every rank writes its numbers into the next rank's `inbox`, then checks what the previous rank
// wrote into its own; then it times those stores.
//
//   iris-run -n 2 ./example_02_store
#include <cstdio>
#include <vector>

#include "common/example.hpp"
#include "iris/iris.hpp"

namespace {

__global__ void store_to(const __grid_constant__ iris::device::Context ctx, int4* inbox,
                         const int4* data, std::size_t vectors, int to) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < vectors;
       i += std::size_t{gridDim.x} * blockDim.x) {
    iris::device::store(ctx, inbox + i, data[i], to);
  }
}

}  // namespace

int main() {
  if (!example::gpu_visible("02_store")) return iris::examples::kNoDeviceExitCode;
  try {
    auto ctx = iris::Context::from_env();
    constexpr std::size_t kCount = std::size_t{1} << 24;  // ints: 64 MiB per rank
    const int to = (ctx.rank() + 1) % ctx.world_size();
    const int from = (ctx.rank() + ctx.world_size() - 1) % ctx.world_size();
    auto data = ctx.arange<int>(kCount, ctx.rank() << 24);  // rank r holds r * 2^24 + i
    auto inbox = ctx.zeros<int>(kCount);  // zeroed on every rank before anyone writes to it

    auto send = [&] {
      store_to<<<2 * example::sm_count(), 512>>>(
          ctx.device(), reinterpret_cast<int4*>(inbox.data()),
          reinterpret_cast<const int4*>(data.data()), kCount / 4, to);
    };
    send();
    IRIS_CUDA_CHECK(cudaGetLastError());
    ctx.barrier();  // every rank's stores are done and visible
    const std::vector<int> got = inbox.to_host();
    if (!example::check(ctx.rank(), "values stored by the previous rank", got,
                        [&](std::size_t i) { return static_cast<int>((from << 24) + i); }))
      return 1;

    ctx.barrier();  // everyone has checked before anyone stores again
    const double ms = example::median_ms(nullptr, {}, [&](long) { send(); });
    std::printf("rank %d: stored %zu MiB into rank %d, all correct: %.0f GB/s\n", ctx.rank(),
                kCount * sizeof(int) >> 20, to, example::gb_per_s(kCount * sizeof(int), ms));
    return 0;
  } catch (const iris::Error& error) {
    std::fprintf(stderr, "02_store: %s\n", error.what());
    return iris::examples::exit_code(error);
  }
}
