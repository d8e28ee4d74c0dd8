// expect: iris: get/put/copy keep 1 to 16 vectors in flight per thread
#include "iris/device.hpp"
__global__ void k(iris::device::Context ctx, float* d, const float* s) {
  iris::device::get<0>(iris::block{}, ctx, d, s, 100, 1);
}
