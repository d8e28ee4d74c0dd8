// expect: iris: a store (or a non-fetching atomic, or a signal) reads nothing, so it cannot acquire
#include "iris/device.hpp"
__global__ void k(iris::device::Context ctx, unsigned* p) {
  iris::device::atomic_store(ctx, p, 1u, 0, iris::acquire);
}
