// expect: iris: atomics take 32/64-bit integers, float or double
#include "iris/device.hpp"
__global__ void k(iris::device::Context ctx, short* p) {
  iris::device::atomic_add(ctx, p, 1, 0);
}
