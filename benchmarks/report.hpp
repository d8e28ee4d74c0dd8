// What every benchmark shares on top of the examples' helpers: a table for people, a JSON file
// for machines (with the date, device and commit it was measured on) and a CSV of the same
// columns, and helpers for several ranks. The timing harness (CUDA events around repeated
// calls, medians), command-line numbers and the GPU checks are the examples'
// (examples/common/example.hpp), and benchmarks call them by that one name:
// example::time_calls_ms, example::number_arg, ...
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "common/example.hpp"
#include "iris/host/bootstrap.hpp"
#include "iris/host/error.hpp"

namespace iris::bench {

/// One row of results: ordered (name, value) pairs, printed as a table and written as JSON.
class Row {
 public:
  Row& text(const std::string& key, const std::string& value) {
    return put(key, '"' + value + '"', value);
  }
  Row& number(const std::string& key, double value, const char* format = "%.3f") {
    char shown[64];
    std::snprintf(shown, sizeof(shown), format, value);
    char exact[64];
    std::snprintf(exact, sizeof(exact), "%.15g", value);  // integers up to 1e15 exactly
    return put(key, exact, shown);
  }
  const std::vector<std::string>& keys() const { return keys_; }
  const std::string& json(const std::string& key) const { return json_.at(key); }
  const std::string& shown(const std::string& key) const { return shown_.at(key); }

 private:
  Row& put(const std::string& key, const std::string& json, const std::string& shown) {
    if (!json_.count(key)) keys_.push_back(key);
    json_[key] = json;
    shown_[key] = shown;
    return *this;
  }
  std::vector<std::string> keys_;
  std::map<std::string, std::string> json_, shown_;
};

inline std::string device_name() {
  int device = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaGetDeviceProperties(&prop, device) != cudaSuccess)
    return "unknown";
  return prop.name;
}

inline std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return text;
}

/// Prints `rows` as an aligned table under `title` (and `context_note` under it).
inline void print_table(const std::string& title, const std::vector<Row>& rows,
                        const std::string& context_note = "") {
  std::printf("\n%s\n", title.c_str());
  if (!context_note.empty()) std::printf("%s\n", context_note.c_str());
  if (rows.empty()) return;
  const auto& keys = rows.front().keys();
  std::vector<std::size_t> width(keys.size());
  for (std::size_t k = 0; k < keys.size(); ++k) {
    width[k] = keys[k].size();
    for (const Row& row : rows) width[k] = std::max(width[k], row.shown(keys[k]).size());
  }
  for (std::size_t k = 0; k < keys.size(); ++k)
    std::printf("%*s  ", static_cast<int>(width[k]), keys[k].c_str());
  std::printf("\n");
  for (const Row& row : rows) {
    for (std::size_t k = 0; k < keys.size(); ++k)
      std::printf("%*s  ", static_cast<int>(width[k]), row.shown(keys[k]).c_str());
    std::printf("\n");
  }
}

/// Writes {"benchmark", "date", "device", "commit", "context", "rows": [...]} to `json_path`
/// (nothing when it is empty).
inline void write_json(const std::string& json_path, const std::string& title,
                       const std::vector<Row>& rows, const std::string& context_note = "") {
  if (json_path.empty()) return;
  std::ofstream out(json_path);
  const char* commit = std::getenv("IRIS_COMMIT");
  out << "{\n  \"benchmark\": \"" << title << "\",\n  \"date\": \"" << utc_now()
      << "\",\n  \"device\": \"" << device_name() << "\",\n  \"commit\": \""
      << (commit ? commit : "unknown") << "\",\n  \"context\": \"" << context_note
      << "\",\n  \"rows\": [\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    out << "    {";
    const auto& keys = rows[i].keys();
    for (std::size_t k = 0; k < keys.size(); ++k)
      out << (k ? ", " : "") << '"' << keys[k] << "\": " << rows[i].json(keys[k]);
    out << (i + 1 < rows.size() ? "},\n" : "}\n");
  }
  out << "  ]\n}\n";
  std::printf("wrote %s\n", json_path.c_str());
}

/// Writes `rows` to `csv_path` as CSV (nothing when the path is empty): a header line of the
/// table's columns, then one line per row; numbers exact as in the JSON, text as printed (quoted
/// where it holds a comma, a quote or a line break). Title and note stay in the table and the
/// JSON, so that the file loads as it is (pandas.read_csv, a spreadsheet).
inline void write_csv(const std::string& csv_path, const std::vector<Row>& rows) {
  if (csv_path.empty()) return;
  std::ofstream out(csv_path);
  const auto cell = [](const std::string& json) {
    if (json.empty() || json.front() != '"') return json;  // a number
    const std::string text = json.substr(1, json.size() - 2);
    if (text.find_first_of(",\"\n") == std::string::npos) return text;
    std::string quoted = "\"";
    for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
    return quoted + '"';
  };
  if (!rows.empty()) {
    const auto& keys = rows.front().keys();
    for (std::size_t k = 0; k < keys.size(); ++k) out << (k ? "," : "") << keys[k];
    out << "\n";
    for (const Row& row : rows) {
      for (std::size_t k = 0; k < keys.size(); ++k)
        out << (k ? "," : "") << cell(row.json(keys[k]));
      out << "\n";
    }
  }
  std::printf("wrote %s\n", csv_path.c_str());
}

/// print_table, then write_json and write_csv.
inline void report(const std::string& title, const std::vector<Row>& rows,
                   const std::string& json_path, const std::string& context_note = "",
                   const std::string& csv_path = "") {
  print_table(title, rows, context_note);
  write_json(json_path, title, rows, context_note);
  write_csv(csv_path, rows);
}

/// The value after `--json` in argv, or "".
inline std::string json_path_from_args(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--json") return argv[i + 1];
  return "";
}

/// The value after `--csv` in argv, or "".
inline std::string csv_path_from_args(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--csv") return argv[i + 1];
  return "";
}

/// Each rank's GPU as a device ordinal of this process (collective; -1 where this process
/// cannot see that GPU). Ranks may see different ordinals for one GPU, so they swap PCI bus ids.
inline std::vector<int> device_of_each_rank(Bootstrap& bootstrap) {
  constexpr int kBusIdBytes = 32;
  char mine[kBusIdBytes] = {};
  int device = 0;
  IRIS_CUDA_CHECK(cudaGetDevice(&device));
  IRIS_CUDA_CHECK(cudaDeviceGetPCIBusId(mine, kBusIdBytes, device));
  std::vector<char> all(std::size_t{kBusIdBytes} * bootstrap.world_size());
  bootstrap.allgather(mine, all.data(), kBusIdBytes);
  std::vector<int> ordinals(bootstrap.world_size(), -1);
  for (int r = 0; r < bootstrap.world_size(); ++r)
    if (cudaDeviceGetByPCIBusId(&ordinals[r], &all[std::size_t{kBusIdBytes} * r]) != cudaSuccess) {
      ordinals[r] = -1;
      cudaGetLastError();
    }
  return ordinals;
}

/// The largest of every rank's `value` (collective): a job runs at its slowest rank's pace.
inline double slowest_rank(Bootstrap& bootstrap, double value) {
  std::vector<double> all(bootstrap.world_size());
  bootstrap.allgather(&value, all.data(), sizeof(double));
  return *std::max_element(all.begin(), all.end());
}

/// The sum of every rank's `value` (collective): counts that each rank makes of its own part, such
/// as wrong elements.
inline std::uint64_t sum_over_ranks(Bootstrap& bootstrap, std::uint64_t value) {
  std::vector<std::uint64_t> all(bootstrap.world_size());
  bootstrap.allgather(&value, all.data(), sizeof(value));
  std::uint64_t sum = 0;
  for (std::uint64_t v : all) sum += v;
  return sum;
}

/// Lets `from_device` reach `to_device`'s memory (the reference copies between plain buffers of
/// two GPUs); peer access that is already on is fine.
inline void enable_peer_access(int from_device, int to_device) {
  IRIS_CUDA_CHECK(cudaSetDevice(from_device));
  const cudaError_t status = cudaDeviceEnablePeerAccess(to_device, 0);
  if (status == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();  // not an error here: clear it
  } else {
    IRIS_CUDA_CHECK(status);
  }
}

#if defined(__CUDACC__)
/// Nanoseconds of the GPU's global timer, for latencies timed inside a kernel (a loop of round
/// trips or barriers) where events around the launch would add the launch and the ranks' start
/// skew. Its resolution can be as coarse as a microsecond: time batches of many operations.
__device__ inline std::uint64_t device_clock_ns() {
  std::uint64_t ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}

/// Counts into `*wrong` the words of `got` that differ from `want` in [0, count), and those in
/// [count, count + guard) that no longer hold `poison` (written past the end). How benchmarks
/// check a call once before they time it.
template <class Word>
__global__ void count_mismatches(const Word* got, const Word* want, std::size_t count,
                                 std::size_t guard, Word poison, unsigned long long* wrong) {
  unsigned long long mine = 0;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count + guard;
       i += std::size_t{gridDim.x} * blockDim.x)
    mine += got[i] != (i < count ? want[i] : poison);
  if (mine != 0) atomicAdd(wrong, mine);
}
#endif

}  // namespace iris::bench
