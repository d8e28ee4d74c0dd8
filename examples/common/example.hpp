// What the numbered examples share, small enough to copy into your own program: a check that a
// GPU is there, CUDA-event timing of repeated calls (the median of several samples), decimal
// GB/s, a result check that prints what it found wrong, and an example's main() (its exit
// codes). Only the CUDA runtime and iris/host/error.hpp (for IRIS_CUDA_CHECK) are needed. The
// benchmarks time with these too (benchmarks/report.hpp adds tables and JSON on top).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/exit_codes.hpp"
#include "iris/host/error.hpp"

namespace example {

/// True when a CUDA GPU is visible. Otherwise prints why `program` has nothing to run, so that
/// it can exit with iris::examples::kNoDeviceExitCode (77, "skipped") on a machine without a GPU.
inline bool gpu_visible(const char* program) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) return true;
  cudaGetLastError();  // clear the "no device" status so that nothing reports it later
  std::printf(
      "%s: no CUDA GPU is visible, so there is nothing to run. Iris needs an NVIDIA GPU "
      "(Hopper or newer); run this under iris-run on a GPU machine.\n",
      program);
  return false;
}

/// An example's main(): without a GPU, says so and returns kNoDeviceExitCode (77, "skipped");
/// otherwise returns run(argc, argv), or, when Iris throws, prints "<program>: <what>" to stderr
/// and returns exit_code(error) (exit_codes.hpp).
template <class Run>
int run_main(int argc, char** argv, Run&& run) {
  if (!gpu_visible(argv[0])) return iris::examples::kNoDeviceExitCode;
  try {
    return run(argc, argv);
  } catch (const iris::Error& error) {
    std::fprintf(stderr, "%s: %s\n", argv[0], error.what());
    return iris::examples::exit_code(error);
  }
}

/// Multiprocessors of the current GPU: grids are sized in multiples of it.
inline int sm_count() {
  int device = 0, sms = 0;
  IRIS_CUDA_CHECK(cudaGetDevice(&device));
  IRIS_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

struct Stats {
  double median = 0, min = 0, max = 0;
};

/// Median, smallest and largest of `samples` (all zero when there are none).
inline Stats summarize(std::vector<double> samples) {
  Stats stats;
  if (samples.empty()) return stats;
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  stats.median = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  stats.min = samples.front();
  stats.max = samples.back();
  return stats;
}

/// How often a timed call repeats. Each sample times `calls_per_sample` back-to-back calls with
/// one pair of CUDA events and divides, so that calls shorter than an event's resolution (and
/// than a launch) still measure what a stream of them sustains.
struct Repeats {
  int warmup = 3;    ///< untimed calls first: module load, first-touch, clocks
  int samples = 21;  ///< the median of these is reported
  int calls_per_sample = 1;
};

/// Milliseconds per call of `enqueue(call)`, one value per sample. `enqueue` queues one call on
/// `stream`; it gets a running call number so that it can rotate among buffers (keeping
/// repeated calls out of the L2 cache). `before_sample()` queues what must precede each sample
/// untimed (e.g. a device barrier that lines the ranks up). The host waits for each sample, so
/// nothing queues up behind the events.
template <class Enqueue, class BeforeSample = void (*)()>
std::vector<double> time_calls_ms(
    cudaStream_t stream, const Repeats& repeats, Enqueue&& enqueue,
    BeforeSample&& before_sample = [] {}) {
  cudaEvent_t start, stop;
  IRIS_CUDA_CHECK(cudaEventCreate(&start));
  IRIS_CUDA_CHECK(cudaEventCreate(&stop));
  long call = 0;
  for (int i = 0; i < repeats.warmup; ++i) enqueue(call++);
  IRIS_CUDA_CHECK(cudaGetLastError());
  std::vector<double> samples;
  for (int s = 0; s < repeats.samples; ++s) {
    before_sample();
    IRIS_CUDA_CHECK(cudaEventRecord(start, stream));
    for (int i = 0; i < repeats.calls_per_sample; ++i) enqueue(call++);
    IRIS_CUDA_CHECK(cudaEventRecord(stop, stream));
    IRIS_CUDA_CHECK(cudaEventSynchronize(stop));
    IRIS_CUDA_CHECK(cudaGetLastError());
    float ms = 0;
    IRIS_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    samples.push_back(static_cast<double>(ms) / repeats.calls_per_sample);
  }
  IRIS_CUDA_CHECK(cudaEventDestroy(start));
  IRIS_CUDA_CHECK(cudaEventDestroy(stop));
  return samples;
}

/// Median of `time_calls_ms`.
template <class Enqueue>
double median_ms(cudaStream_t stream, const Repeats& repeats, Enqueue&& enqueue) {
  return summarize(time_calls_ms(stream, repeats, enqueue)).median;
}

/// Decimal gigabytes per second (as NVIDIA's and NCCL's figures are).
inline double gb_per_s(double bytes, double ms) {
  return bytes / (ms * 1e-3) / 1e9;
}

/// The number after `flag` in argv (`--samples 50`), or `fallback`.
inline double number_arg(int argc, char** argv, const char* flag, double fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], flag) == 0) return std::atof(argv[i + 1]);
  return fallback;
}

/// The word after `flag` in argv (`--trace trace.json`), or null.
inline const char* string_arg(int argc, char** argv, const char* flag) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], flag) == 0) return argv[i + 1];
  return nullptr;
}

/// Checks `got[i] == want(i)` for every element; when some differ, prints "rank R: N of M
/// <what> are WRONG (first at index I)" and returns false.
template <class T, class Want>
bool check(int rank, const char* what, const std::vector<T>& got, Want&& want) {
  std::size_t wrong = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want(i)) continue;
    if (wrong++ == 0) first = i;
  }
  if (wrong != 0)
    std::printf("rank %d: %zu of %zu %s are WRONG (first at index %zu)\n", rank, wrong, got.size(),
                what, first);
  return wrong == 0;
}

}  // namespace example
