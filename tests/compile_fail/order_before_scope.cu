// expect: iris: the order argument must be iris::relaxed, iris::acquire, iris::release or
// iris::acq_rel
#include "iris/device.hpp"
__global__ void k(iris::device::Context ctx, unsigned* p) {
  iris::device::atomic_add(ctx, p, 1u, 0, iris::sys, iris::acq_rel);
}
