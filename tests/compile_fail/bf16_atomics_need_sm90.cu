// expect: iris: atomic_add on __nv_bfloat16 or __nv_bfloat162 needs sm_90 (Hopper) or newer
// arch: 80
#include "iris/device.hpp"
__global__ void k(iris::device::Context ctx, __nv_bfloat16* p) {
  iris::device::atomic_add_nofetch(ctx, p, __float2bfloat16(1.0f), 0);
}
