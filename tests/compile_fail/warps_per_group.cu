// expect: iris::warps<N>: a block has 1 to 32 warps
#include "iris/device.hpp"
__global__ void k() {
  iris::warps<33>::sync();
}
