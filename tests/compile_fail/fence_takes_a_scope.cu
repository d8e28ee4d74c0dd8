// expect: iris: fence takes iris::cta, iris::gpu or iris::sys
#include "iris/device.hpp"
__global__ void k() {
  iris::device::fence(iris::release);
}
