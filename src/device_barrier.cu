// iris::Context::device_barrier: a one-block kernel that meets every rank on the barrier channel
// reserved for it, so that it never collides with block-level barriers of application kernels.
#include "detail/context_state.hpp"
#include "iris/device/barrier.hpp"
#include "iris/host/context.hpp"
#include "iris/host/error.hpp"

namespace iris {

namespace {

/// One warp: thread t announces to and waits for ranks t, t + 32, ...
constexpr unsigned kDeviceBarrierThreads = 32;

__global__ void device_barrier_kernel(const __grid_constant__ device::Context ctx) {
  device::detail::meet_ranks(
      ctx, device::detail::world_channel(ctx, device::detail::kDeviceBarrierChannel),
      "device_barrier");
}

}  // namespace

void Context::device_barrier(cudaStream_t stream) {
  state_->make_current();
  device_barrier_kernel<<<1, kDeviceBarrierThreads, 0, stream>>>(device());
  IRIS_CUDA_CHECK(cudaGetLastError());
}

}  // namespace iris
