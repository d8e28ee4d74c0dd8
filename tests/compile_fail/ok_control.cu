// expect: OK
// The control: the same kind of file without a mistake compiles, so the checks above fail for
// the reason they name and not because the harness cannot compile anything.
#include "iris/device.hpp"
__global__ void k(iris::device::Context ctx, __nv_bfloat16* p, unsigned* q) {
  iris::device::atomic_add_nofetch(ctx, p, __float2bfloat16(1.0f), 0);
  iris::device::atomic_store(ctx, q, 1u, 0, iris::release);
}
