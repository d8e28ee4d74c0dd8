// What every benchmark shares: statistics over repeated timings, a table for people, and a JSON
// file for machines (with the date, device and commit it was measured on).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace iris::bench {

struct Stats {
  double median = 0, min = 0, max = 0;
};

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

/// One row of results: ordered (name, value) pairs, printed as a table and written as JSON.
class Row {
 public:
  Row& text(const std::string& key, const std::string& value) { return put(key, '"' + value + '"', value); }
  Row& number(const std::string& key, double value, const char* format = "%.3f") {
    char shown[64];
    std::snprintf(shown, sizeof(shown), format, value);
    char exact[64];
    std::snprintf(exact, sizeof(exact), "%.9g", value);
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
  if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess)
    return "unknown";
  return prop.name;
}

inline std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return text;
}

/// Prints `rows` as an aligned table under `title`, and writes
/// {"benchmark", "date", "device", "commit", "context", "rows": [...]} to `json_path` when set.
inline void report(const std::string& title, const std::vector<Row>& rows,
                   const std::string& json_path, const std::string& context_note = "") {
  std::printf("\n%s\n", title.c_str());
  if (!context_note.empty()) std::printf("%s\n", context_note.c_str());
  if (!rows.empty()) {
    const auto& keys = rows.front().keys();
    std::vector<std::size_t> width(keys.size());
    for (std::size_t k = 0; k < keys.size(); ++k) {
      width[k] = keys[k].size();
      for (const Row& row : rows) width[k] = std::max(width[k], row.shown(keys[k]).size());
    }
    for (std::size_t k = 0; k < keys.size(); ++k) std::printf("%*s  ", static_cast<int>(width[k]), keys[k].c_str());
    std::printf("\n");
    for (const Row& row : rows) {
      for (std::size_t k = 0; k < keys.size(); ++k)
        std::printf("%*s  ", static_cast<int>(width[k]), row.shown(keys[k]).c_str());
      std::printf("\n");
    }
  }
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

/// The value after `--json` in argv, or "".
inline std::string json_path_from_args(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--json") return argv[i + 1];
  return "";
}

}  // namespace iris::bench
