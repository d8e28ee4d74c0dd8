// 00_hello — the smallest Iris program.
//
// Teaches: joining the job with Context::from_env(), a symmetric allocation, translating a
// pointer to a peer inside a kernel (once), writing to the peer with ordinary stores, and the
// host barrier that makes those stores visible. Each rank writes a pattern into the next rank's
// inbox, then checks what the previous rank wrote into its own.
//
//   iris-run -n 4 ./example_00_hello
#include <cstdio>
#include <vector>

#include "common/exit_codes.hpp"
#include "iris/iris.hpp"

namespace {

__host__ __device__ int pattern(int from_rank, std::size_t i) {
  return from_rank * 1000003 + static_cast<int>(i % 1000003);
}

__global__ void write_to_next(iris::device::Context ctx, int* inbox, std::size_t count) {
  const int next = (ctx.rank() + 1) % ctx.world_size();
  int* peer_inbox = ctx.translate(inbox, next);  // the next rank's copy of `inbox`
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += std::size_t{gridDim.x} * blockDim.x) {
    peer_inbox[i] = pattern(ctx.rank(), i);
  }
}

void print_layout(const iris::Context& ctx) {
  const iris::HeapInfo heap = ctx.heap();
  std::printf("%d ranks, heap %zu MiB per rank via %s, Iris reserves the first %zu KiB\n",
              ctx.world_size(), heap.size >> 20, iris::to_string(heap.transport).c_str(),
              heap.reserved >> 10);
  const auto device = ctx.device();
  for (int r = 0; r < ctx.world_size(); ++r) {
    std::printf("  rank %d heap at %p\n", r, static_cast<void*>(device.heap_base_of(r)));
  }
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf(
        "00_hello: no CUDA GPU is visible, so there is nothing to run. Iris needs an NVIDIA "
        "GPU (Hopper or newer); run this under iris-run on a GPU machine.\n");
    return iris::examples::kNoDeviceExitCode;
  }
  try {
    auto ctx = iris::Context::from_env();
    if (ctx.rank() == 0) print_layout(ctx);

    constexpr std::size_t kCount = std::size_t{1} << 20;
    auto inbox = ctx.zeros<int>(kCount);  // zeroed on every rank before anyone writes
    write_to_next<<<264, 256>>>(ctx.device(), inbox.data(), kCount);
    IRIS_CUDA_CHECK(cudaGetLastError());
    ctx.barrier();  // every rank's kernel is done: all inboxes are filled

    const int previous = (ctx.rank() + ctx.world_size() - 1) % ctx.world_size();
    const std::vector<int> received = inbox.to_host();
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < kCount; ++i) wrong += received[i] != pattern(previous, i);
    std::printf("rank %d on GPU %d: %zu values from rank %d, %s\n", ctx.rank(), ctx.cuda_device(),
                kCount, previous, wrong == 0 ? "all correct" : "WRONG");
    if (wrong != 0) {
      std::printf("rank %d: %zu of %zu values differ\n", ctx.rank(), wrong, kCount);
      return 1;
    }
    return 0;
  } catch (const iris::Error& error) {
    std::fprintf(stderr, "00_hello: %s\n", error.what());
    return iris::examples::exit_code(error);
  }
}
