// Uses the host and device halves of Iris; runs without a GPU (it only checks linking). Under
// iris-run it also prints the rank the launcher gave it.
#include <cstdio>
#include <cstdlib>

#include "iris/iris.hpp"

__global__ void touch(iris::device::Context ctx, int* data) {
  *ctx.translate(data, ctx.rank()) = 1;
}

int main() {
  const char* rank = std::getenv("IRIS_RANK");
  const char* world = std::getenv("IRIS_WORLD_SIZE");
  std::printf("linked Iris; IRIS_HEAP_SIZE=2GiB parses to %zu bytes; IRIS_RANK=%s of %s\n",
              iris::env::parse_size("2GiB", "IRIS_HEAP_SIZE"), rank ? rank : "-",
              world ? world : "-");
  return iris::env::parse_size("2GiB", "IRIS_HEAP_SIZE") == (std::size_t{2} << 30) ? 0 : 1;
}
