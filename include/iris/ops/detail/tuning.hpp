// What the fused ops' kAuto picks: one table of measured points (op, world size, M, N, K) ->
// pattern (and, for GEMM + all-scatter, the SM split). Not public; docs/ops.md describes it.
// Needs no CUTLASS.
//
// Where an op's kAuto choice comes from, first that answers:
//   1. the JSON file named by IRIS_OPS_TUNING (read once per process, at the first kAuto
//      resolution; each op's benchmark writes its entries with --tune FILE);
//   2. the table compiled into the library (OpsTuning::defaults(); GEMM + all-scatter only);
//   3. the op's own rule (in its .cu; docs/ops.md states each).
// A table answers with the entry of the op's section and the team's size whose (M, N, K) is
// nearest in log2 distance (|log2 M/M'| + |log2 N/N'| + |log2 K/K'|; the first such entry on
// ties). It does not answer when it has no such entry, or when the op cannot run the entry's
// pattern on this problem (GEMM + reduce-scatter's fused sequential or GEMM + all-reduce's
// two-shot with row blocks that are not whole tiles).
// Every rank of a team must see the same table: initialize is collective and the patterns
// differ in their collective set-up.
//
// M, N and K per section, as that op's benchmark reports them:
//   gemm_all_scatter     M; N of all members' column blocks together (args.n x W); K
//   gemm_reduce_scatter  M; N; K of all ranks together (args.k x W: each multiplies a K shard)
//   gemm_all_reduce      M; N; K of all ranks together (args.k x W), as reduce-scatter
//   all_gather_gemm      M of all ranks together (args.m: each holds M / W rows); N per rank
//                        (args.n); K
//
// The file's form: one array per op, every section optional; "gemm_sms" and "comm_blocks" only
// in gemm_all_scatter's entries (optional; 0: the op's default split):
//   {"gemm_all_scatter": [
//      {"world": 4, "m": 4096, "n": 4096, "k": 14336, "pattern": "workgroup_specialized",
//       "gemm_sms": 112, "comm_blocks": 16}],
//    "gemm_reduce_scatter": [
//      {"world": 4, "m": 4096, "n": 3584, "k": 8192, "pattern": "fused_sequential"}],
//    "gemm_all_reduce": [...], "all_gather_gemm": [...]}
// A pattern is the op's own name for it (to_string of its enum), never "auto".
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "iris/ops/all_gather_gemm.hpp"
#include "iris/ops/gemm_all_reduce.hpp"
#include "iris/ops/gemm_all_scatter.hpp"
#include "iris/ops/gemm_reduce_scatter.hpp"

namespace iris::ops::detail {

inline constexpr const char* kOpsTuningEnv = "IRIS_OPS_TUNING";

/// An entry's pattern; its type names the op, and so the section of the file it belongs to.
using TunedPattern =
    std::variant<AllScatterPattern, ReduceScatterPattern, AllReducePattern, AllGatherPattern>;

/// The section of `pattern`'s op: "gemm_all_scatter", "gemm_reduce_scatter",
/// "gemm_all_reduce" or "all_gather_gemm".
std::string_view section_of(const TunedPattern& pattern);

/// One measured point.
struct TuningEntry {
  int world = 0, m = 0, n = 0, k = 0;  ///< M, N and K as the op's section defines them (above)
  TunedPattern pattern{};
  int gemm_sms = 0, comm_blocks = 0;  ///< gemm_all_scatter only; 0: the op's default split
};

/// A table's answer for one op: kAuto when it has none.
template <class Pattern>
struct TunedChoice {
  Pattern pattern = Pattern::kAuto;
  int gemm_sms = 0, comm_blocks = 0;
};

class OpsTuning {
 public:
  OpsTuning() = default;
  explicit OpsTuning(std::vector<TuningEntry> entries) : entries_(std::move(entries)) {}

  /// The compiled-in table.
  static const OpsTuning& defaults();
  /// IRIS_OPS_TUNING's table when the variable is set (read once), else defaults().
  static const OpsTuning& current();
  /// Throws iris::Error(kInvalidArgument) naming `source`, the section, the byte offset and
  /// what is wrong (an unknown section, a pattern the section's op does not have, a field of
  /// the wrong type or one that op does not take).
  static OpsTuning parse(std::string_view json, std::string_view source = "tuning table");
  static OpsTuning from_file(const std::string& path);

  /// The nearest entry of `Pattern`'s op and this world size, or kAuto when there is none.
  /// Defined for the four pattern types above.
  template <class Pattern>
  TunedChoice<Pattern> lookup(int world, int m, int n, int k) const;

  /// kAuto's order: this table's lookup(), then defaults()'s, then `rule` (the op's own choice,
  /// with the op's default split). A table's pattern for which `runs(pattern)` is false counts
  /// as no answer from that table.
  template <class Pattern, class Runs>
  TunedChoice<Pattern> choose(int world, int m, int n, int k, Pattern rule, Runs runs) const {
    for (const OpsTuning* table : {this, &defaults()})
      if (const auto c = table->template lookup<Pattern>(world, m, n, k);
          c.pattern != Pattern::kAuto && runs(c.pattern))
        return c;
    return {rule};
  }

  /// This table with the entries of `op`'s op (any of its patterns; the value is not used) for
  /// `world` ranks replaced by `entries`: what one benchmark run measured. The op's entries of
  /// other world sizes and the other ops' sections are kept. An entry of another op or world
  /// size, or one whose pattern is kAuto, is an iris::Error(kInvalidArgument).
  OpsTuning with_measured(const TunedPattern& op, int world,
                          std::vector<TuningEntry> entries) const;

  const std::vector<TuningEntry>& entries() const { return entries_; }
  /// The file's form, sections in the order above, only those with entries.
  std::string to_json() const;

 private:
  std::vector<TuningEntry> entries_;
};

/// The benchmarks' --tune FILE: FILE's table (where the file exists; a malformed one is an
/// iris::Error and FILE is left as it was) with_measured(op, world, entries), written back to
/// FILE, so that one file collects every op's section at every world size measured.
void write_tuning_entries(const std::string& path, const TunedPattern& op, int world,
                          std::vector<TuningEntry> entries);

}  // namespace iris::ops::detail
