// Algorithm selection: a table of (collective, team size range, byte range) -> algorithm and
// launch shape. The first matching entry wins.
//
// Where the choice comes from, strongest first:
//   1. Options::algorithm of the call;
//   2. IRIS_CCL_ALGORITHM, e.g. "all_reduce=two_shot,all_gather=push" (one algorithm per
//      collective; a collective left out is not forced);
//   3. the table in the JSON file named by IRIS_CCL_TUNING (read once, when a communicator is
//      made; `ccl_bench --tune out.json` writes one);
//   4. the table compiled into the library (TuningTable::defaults(), measured on an H200).
// A forced algorithm that cannot run the call (an all_reduce too large for the packet buffer,
// an in-place call an algorithm cannot take; Communicator::cannot_run says which) is an
// iris::Error; a table entry that cannot is skipped. Every rank of a team must see the same table
// and the same forcing.
//
// The file's form (bytes and team sizes inclusive; missing bounds are unbounded):
//   {"entries": [
//     {"collective": "all_reduce", "team_min": 2, "team_max": 8, "bytes_max": 262144,
//      "algorithm": "one_shot", "max_blocks": 16},
//     {"collective": "all_reduce", "algorithm": "two_shot"}]}
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "iris/ccl/types.hpp"

namespace iris::ccl {

inline constexpr const char* kTuningEnv = "IRIS_CCL_TUNING";
inline constexpr const char* kAlgorithmEnv = "IRIS_CCL_ALGORITHM";

struct TuningEntry {
  Collective collective = Collective::kAllReduce;
  int team_min = 1;
  int team_max = std::numeric_limits<int>::max();
  std::size_t bytes_min = 0;
  std::size_t bytes_max = std::numeric_limits<std::size_t>::max();
  Algorithm algorithm = Algorithm::kAuto;
  int max_blocks = 0;           ///< 0: the communicator's budget; never more than it
  std::size_t chunk_bytes = 0;  ///< 0: the algorithm's default

  bool matches(Collective c, int team_size, std::size_t bytes) const {
    return c == collective && team_size >= team_min && team_size <= team_max &&
           bytes >= bytes_min && bytes <= bytes_max;
  }
};

class TuningTable {
 public:
  TuningTable() = default;
  explicit TuningTable(std::vector<TuningEntry> entries) : entries_(std::move(entries)) {}

  /// The table compiled into the library.
  static TuningTable defaults();
  /// Parses the JSON form above; throws iris::Error(kInvalidArgument) naming `source` and the
  /// byte offset of the first thing it cannot read.
  static TuningTable parse(std::string_view json, std::string_view source = "tuning table");
  /// Reads and parses a file; throws iris::Error naming it when it cannot be read.
  static TuningTable from_file(const std::string& path);

  /// The JSON form; parse(to_json()) gives the same table.
  std::string to_json() const;
  /// Matching entries in order (callers skip those that cannot run the call).
  std::vector<const TuningEntry*> candidates(Collective collective, int team_size,
                                             std::size_t bytes) const;
  const std::vector<TuningEntry>& entries() const { return entries_; }
  void add(const TuningEntry& entry) { entries_.push_back(entry); }

 private:
  std::vector<TuningEntry> entries_;
};

/// Algorithms forced per collective (kAuto: not forced).
using ForcedAlgorithms = std::array<Algorithm, kCollectiveCount>;

/// Parses IRIS_CCL_ALGORITHM's form ("all_reduce=two_shot,all_gather=push"); throws
/// iris::Error(kInvalidArgument) naming the part it cannot read.
ForcedAlgorithms parse_forced_algorithms(std::string_view text);

/// "one_shot" -> Algorithm::kOneShot, ...; throws iris::Error(kInvalidArgument) otherwise.
Algorithm parse_algorithm(std::string_view name);
/// "all_reduce" -> Collective::kAllReduce, ...; throws iris::Error(kInvalidArgument) otherwise.
Collective parse_collective(std::string_view name);

/// True when `algorithm` is one that `collective` has (kAuto counts for every collective).
bool collective_has(Collective collective, Algorithm algorithm);

}  // namespace iris::ccl
