// What GemmAllScatter's kAuto picks: a small table of measured points (world size, M, N, K) ->
// pattern and SM split. Not public; docs/ops.md describes it. Needs no CUTLASS.
//
// Where the table comes from, strongest first:
//   1. the JSON file named by IRIS_OPS_TUNING (read once per process, at the first kAuto
//      initialize; `bench_gemm_all_scatter --tune out.json` writes one);
//   2. the table compiled into the library (AllScatterTuning::defaults()).
// The choice for a problem is the entry with its world size whose (M, N, K) is nearest in
// log2 distance (|log2 M/M'| + |log2 N/N'| + |log2 K/K'|; the first such entry on ties); with
// no entry for the world size, the defaults' choice; with none there either, fused sequential.
// N is the whole C's columns (all members' blocks together), as the benchmark reports it.
// Every rank of a team must see the same table (initialize is collective and the patterns
// differ in their collective set-up).
//
// The file's form (gemm_sms and comm_blocks optional, 0: the op's default split):
//   {"gemm_all_scatter": [
//     {"world": 4, "m": 4096, "n": 4096, "k": 14336, "pattern": "workgroup_specialized",
//      "gemm_sms": 112, "comm_blocks": 16}]}
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "iris/ops/gemm_all_scatter.hpp"

namespace iris::ops::detail {

inline constexpr const char* kAllScatterTuningEnv = "IRIS_OPS_TUNING";

struct AllScatterChoice {
  AllScatterPattern pattern = AllScatterPattern::kFusedSequential;
  int gemm_sms = 0;
  int comm_blocks = 0;
};

struct AllScatterTuningEntry {
  int world = 0, m = 0, n = 0, k = 0;  ///< n: all members' columns together
  AllScatterChoice choice{};
};

/// "bulk_synchronous", "fused_sequential", "producer_consumer", "workgroup_specialized" (not
/// "auto"); anything else is an iris::Error naming the accepted names.
AllScatterPattern parse_all_scatter_pattern(std::string_view name);

class AllScatterTuning {
 public:
  AllScatterTuning() = default;
  explicit AllScatterTuning(std::vector<AllScatterTuningEntry> entries)
      : entries_(std::move(entries)) {}

  /// The compiled-in table.
  static const AllScatterTuning& defaults();
  /// IRIS_OPS_TUNING's table when the variable is set (read once), else defaults().
  static const AllScatterTuning& current();
  /// Throws iris::Error(kInvalidArgument) naming `source`, the byte offset and what is wrong.
  static AllScatterTuning parse(std::string_view json, std::string_view source = "tuning table");
  static AllScatterTuning from_file(const std::string& path);

  /// The nearest entry's choice for this world size, or nothing (pattern kAuto) when the table
  /// has no entry for it.
  AllScatterChoice lookup(int world, int m, int n, int k) const;
  /// lookup() in this table, then in defaults(), then fused sequential.
  AllScatterChoice choose(int world, int m, int n, int k) const;

  const std::vector<AllScatterTuningEntry>& entries() const { return entries_; }
  std::string to_json() const;

 private:
  std::vector<AllScatterTuningEntry> entries_;
};

}  // namespace iris::ops::detail
