// Uses the host and device halves of Iris; runs without a GPU (it only checks linking).
#include <cstdio>

#include "iris/iris.hpp"

__global__ void touch(iris::device::Context ctx, int* data) { *ctx.translate(data, ctx.rank()) = 1; }

int main() {
  std::printf("linked Iris; IRIS_HEAP_SIZE=2GiB parses to %zu bytes\n",
              iris::env::parse_size("2GiB", "IRIS_HEAP_SIZE"));
  return iris::env::parse_size("2GiB", "IRIS_HEAP_SIZE") == (std::size_t{2} << 30) ? 0 : 1;
}
