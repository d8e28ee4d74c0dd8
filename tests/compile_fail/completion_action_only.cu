// expect: iris: the last argument of put/copy is a completion action
#include "iris/device.hpp"
__global__ void k(iris::device::Context ctx, float* d, const float* s) {
  iris::device::put(iris::block{}, ctx, d, s, 100, 1, 5);
}
