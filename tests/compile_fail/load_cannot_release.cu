// expect: iris: a load writes nothing, so it cannot release
#include "iris/device.hpp"
__global__ void k(iris::device::Context ctx, const unsigned* p, unsigned* out) {
  *out = iris::device::wait_until(ctx, p, iris::cmp::ge, 1u, iris::release);
}
