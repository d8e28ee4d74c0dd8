// expect: iris: a signal after data needs a group that can sync
#include "iris/device.hpp"
__global__ void k(iris::device::Context ctx, float* d, const float* s, unsigned long long* flag) {
  iris::device::put(iris::grid{}, ctx, d, s, 100, 1, iris::device::signal_add(flag, 1));
}
