// expect: iris: flags are 32- or 64-bit integers
#include "iris/device.hpp"
__global__ void k(iris::device::Context ctx, short* flag) {
  iris::device::signal_add(ctx, flag, 1, 0);
}
