// What the iris::ops examples (10-18) share around the op's own calls (can_implement,
// initialize, run, which each example shows): the GEMM operands, copying a result back,
// checking it against the host reference and printing the verdict, and timing a pattern. On top
// of common/example.hpp.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/example.hpp"

namespace example {

// The GEMM examples' operands: integers in {-1, 0, 1}, so that every bf16 sum of up to 256
// products is exact and C is checked exactly. The host reference uses the same formulas.

/// Row i, column k of the whole A (row-parallel shards are rows of it).
__host__ __device__ inline int a_value(int i, int k) {
  return (i * 7 + k * 3) % 3 - 1;
}
/// Row i, column k of rank r's K shard of A (a GEMM whose K is split over the ranks).
__host__ __device__ inline int a_shard_value(int r, int i, int k) {
  return (i * 7 + k * 3 + r * 5) % 3 - 1;
}
/// Row j, column k of rank r's B (n x k).
__host__ __device__ inline int b_value(int r, int j, int k) {
  return (j * 5 + k + r * 11) % 3 - 1;
}

/// Fills rank r's operands: A (a_rows x k), rows [row0, row0 + a_rows) of the whole A or, with
/// `k_shard`, rank r's K shard of A; and B (n x k).
__global__ inline void fill_operands(__nv_bfloat16* a, int a_rows, int row0, bool k_shard,
                                     __nv_bfloat16* b, int n, int k, int r) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < a_rows * k || i < n * k;
       i += gridDim.x * blockDim.x) {
    if (i < a_rows * k)
      a[i] = __int2bfloat16_rn(k_shard ? a_shard_value(r, i / k, i % k)
                                       : a_value(row0 + i / k, i % k));
    if (i < n * k) b[i] = __int2bfloat16_rn(b_value(r, i / k, i % k));
  }
}

/// `count` elements of device memory at `device`, copied to the host.
template <class T>
std::vector<T> to_host(const T* device, std::size_t count) {
  std::vector<T> host(count);
  IRIS_CUDA_CHECK(cudaMemcpy(host.data(), device, sizeof(T) * count, cudaMemcpyDeviceToHost));
  return host;
}

/// printf into a std::string.
inline std::string text(const char* format, ...) {
  char line[256];
  va_list args;
  va_start(args, format);
  std::vsnprintf(line, sizeof(line), format, args);
  va_end(args);
  return line;
}

/// What a pattern that the op refuses prints: "rank R: cannot run <pattern>: <why>" (stderr).
/// Returns 1, the example's exit code for it.
template <class Status>
int cannot_run(int rank, const std::string& pattern, const Status& status) {
  std::fprintf(stderr, "rank %d: cannot run %s: %s\n", rank, pattern.c_str(),
               status.message.c_str());
  return 1;
}

/// Checks C (bf16, on the host) against `want` element for element, then prints "rank R:
/// <pattern>: <right>" or, after check's count of the wrong elements, "rank R: <pattern>:
/// WRONG". True when every element is right.
inline bool check_c(int rank, const std::string& pattern, const std::vector<__nv_bfloat16>& c,
                    const std::vector<float>& want, const char* right) {
  std::vector<float> got;
  for (const auto x : c) got.push_back(__bfloat162float(x));
  const bool ok = check(rank, ("elements of C (" + pattern + ")").c_str(), got,
                        [&](std::size_t i) { return want[i]; });
  std::printf("rank %d: %s: %s\n", rank, pattern.c_str(), ok ? right : "WRONG");
  return ok;
}

/// Times `run(call)` on `stream` (2 warm-up calls, the median of 11; every rank times, since the
/// op is collective), and rank 0 prints "<setting>: <ms> ms per <what> (<pattern>)".
template <class Run>
void print_time(int rank, cudaStream_t stream, Run&& run, const std::string& setting,
                const char* what, const std::string& pattern) {
  const double ms = median_ms(stream, {.warmup = 2, .samples = 11}, run);
  if (rank == 0)
    std::printf("%s: %.3f ms per %s (%s)\n", setting.c_str(), ms, what, pattern.c_str());
}

/// e4m3 codes in the order of their values (sign and magnitude to a signed integer), so that
/// neighbouring values differ by one.
inline int fp8_order(unsigned char code) {
  return (code & 0x80) ? -(code & 0x7F) : (code & 0x7F);
}

/// The host reference of residual + all-reduce + RMSNorm, in double, for tokens x hidden:
/// want_out[t][i] = summed(t, i) (the residual plus every rank's part) and want_y[t][i] =
/// want_out[t][i] * gamma(i) / sqrt(mean_i(want_out[t][i]^2) + eps).
template <class Summed, class Gamma>
void rmsnorm_reference(int tokens, int hidden, float eps, Summed&& summed, Gamma&& gamma,
                       std::vector<double>& want_out, std::vector<double>& want_y) {
  for (int t = 0; t < tokens; ++t) {
    double squares = 0;
    for (int i = 0; i < hidden; ++i) {
      const double s = summed(t, i);
      want_out[std::size_t(t) * hidden + i] = s;
      squares += s * s;
    }
    const double scale = 1 / std::sqrt(squares / hidden + eps);
    for (int i = 0; i < hidden; ++i)
      want_y[std::size_t(t) * hidden + i] =
          want_out[std::size_t(t) * hidden + i] * scale * gamma(i);
  }
}

/// Checks an RMSNorm op's outputs, copied back from the device: residual_out (`count` bf16 at
/// `out`) against want_out(e) exactly, and y (at `y`) against the double reference `want_y`:
/// with `fp8`, within one e4m3 step of want_y / y_scale converted the same way (the op's fp32
/// norm may round to the neighbouring value); otherwise, bf16 within a few roundings. Prints
/// what check finds wrong; true when all is right.
template <class WantOut>
bool check_norm(int rank, const __nv_bfloat16* out, const void* y, std::size_t count, bool fp8,
                float y_scale, const std::vector<double>& want_y, WantOut&& want_out) {
  const auto got_out = to_host(out, count);
  const auto got_y =
      to_host(static_cast<const unsigned char*>(y), fp8 ? count : count * sizeof(__nv_bfloat16));
  std::vector<float> out_f(count), y_close(count);
  for (std::size_t e = 0; e < count; ++e) {
    out_f[e] = __bfloat162float(got_out[e]);
    if (fp8) {
      const unsigned char want =
          __nv_cvt_double_to_fp8(want_y[e] / y_scale, __NV_SATFINITE, __NV_E4M3);
      y_close[e] = std::abs(fp8_order(got_y[e]) - fp8_order(want)) <= 1 ? 1.f : 0.f;
    } else {
      __nv_bfloat16 v;
      std::memcpy(&v, got_y.data() + 2 * e, 2);
      const double err = std::abs(__bfloat162float(v) - want_y[e]);
      y_close[e] = err <= std::abs(want_y[e]) / 64 + 1.0 / 256 ? 1.f : 0.f;
    }
  }
  return check(rank, "residual_out elements", out_f, want_out) &&
         check(rank, "y elements", y_close, [](std::size_t) { return 1.f; });
}

/// Times `run(call)` on `stream` (5 warm-up calls, the median of 21 samples of 10 calls; every
/// rank times), and rank 0 prints "<pattern> <setting>: correct|WRONG, <us> us per call".
template <class Run>
void print_norm_time(int rank, cudaStream_t stream, Run&& run, const std::string& pattern,
                     const std::string& setting, bool ok) {
  const double ms = median_ms(stream, {.warmup = 5, .samples = 21, .calls_per_sample = 10}, run);
  if (rank == 0)
    std::printf("%-17s %s: %s, %.2f us per call\n", pattern.c_str(), setting.c_str(),
                ok ? "correct" : "WRONG", ms * 1e3);
}

}  // namespace example
