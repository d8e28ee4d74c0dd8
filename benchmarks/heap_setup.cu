// Heap set-up time: how long Context creation takes (rendezvous, heap creation, fd exchange,
// mapping every peer) and teardown, for a given heap size, at the job's world size.
//
//   iris-run -n 8 ./bench_heap_setup [--heap-gib 1] [--cycles 5] [--json out.json]
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "iris/iris.hpp"
#include "report.hpp"

int main(int argc, char** argv) {
  double heap_gib = 1.0;
  int cycles = 5;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--heap-gib") heap_gib = std::atof(argv[i + 1]);
    if (std::string(argv[i]) == "--cycles") cycles = std::atoi(argv[i + 1]);
  }
  try {
    using Clock = std::chrono::steady_clock;
    // The anchor's barrier lines the ranks up before each timed creation.
    iris::Context anchor = iris::Context::from_env({.heap_size = std::size_t{64} << 20});
    const std::size_t heap_bytes = static_cast<std::size_t>(heap_gib * (1ull << 30));
    std::vector<iris::bench::Row> rows;
    for (const auto transport : {iris::HeapTransport::kVmm, iris::HeapTransport::kIpc}) {
      std::vector<double> create_ms, destroy_ms;
      for (int cycle = 0; cycle < cycles + 1; ++cycle) {  // the first is a warm-up
        anchor.barrier();
        const auto t0 = Clock::now();
        auto ctx = std::make_unique<iris::Context>(
            iris::Context::from_env({.heap_size = heap_bytes, .transport = transport}));
        const auto t1 = Clock::now();
        ctx.reset();
        const auto t2 = Clock::now();
        if (cycle == 0) continue;
        create_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        destroy_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
      }
      // Report the slowest rank's median: the job waits for it.
      std::vector<double> medians(anchor.world_size() * 2);
      const double mine[2] = {example::summarize(create_ms).median,
                              example::summarize(destroy_ms).median};
      anchor.bootstrap().allgather(mine, medians.data(), sizeof(mine));
      double create = 0, destroy = 0;
      for (int r = 0; r < anchor.world_size(); ++r) {
        create = std::max(create, medians[2 * r]);
        destroy = std::max(destroy, medians[2 * r + 1]);
      }
      rows.push_back(iris::bench::Row()
                         .text("transport", iris::to_string(transport))
                         .number("ranks", anchor.world_size(), "%.0f")
                         .number("heap_GiB_per_rank", heap_gib, "%.2f")
                         .number("create_ms_median", create, "%.1f")
                         .number("destroy_ms_median", destroy, "%.1f"));
    }
    if (anchor.rank() == 0) {
      iris::bench::report("heap set-up time (slowest rank's median of " + std::to_string(cycles) +
                              " cycles after one warm-up)",
                          rows, iris::bench::json_path_from_args(argc, argv),
                          "ranks on GPUs: " + std::to_string(anchor.local_world_size()) +
                              " local ranks; create = Context construction incl. rendezvous");
    }
    return 0;
  } catch (const iris::Error& error) {
    std::fprintf(stderr, "heap_setup: %s\n", error.what());
    return 1;
  }
}
