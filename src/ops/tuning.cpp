// The fused ops' kAuto table: the compiled-in defaults, IRIS_OPS_TUNING's JSON form (one section
// per op), lookup, and the benchmarks' writer.
#include "iris/ops/detail/tuning.hpp"

#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

#include "detail/json.hpp"
#include "iris/host/env.hpp"
#include "iris/host/error.hpp"

namespace iris::ops::detail {

namespace {
namespace json = iris::detail::json;

/// What the file knows of one op: its section, the name its errors use, the patterns an entry
/// may name and whether its entries take the SM split.
template <class Pattern>
struct OpInfo;
template <>
struct OpInfo<AllScatterPattern> {
  static constexpr std::string_view section = "gemm_all_scatter", title = "GEMM + all-scatter";
  static constexpr bool split = true;
  static constexpr AllScatterPattern patterns[] = {
      AllScatterPattern::kBulkSynchronous, AllScatterPattern::kFusedSequential,
      AllScatterPattern::kProducerConsumer, AllScatterPattern::kWorkgroupSpecialized};
};
template <>
struct OpInfo<ReduceScatterPattern> {
  static constexpr std::string_view section = "gemm_reduce_scatter",
                                    title = "GEMM + reduce-scatter";
  static constexpr bool split = false;
  static constexpr ReduceScatterPattern patterns[] = {
      ReduceScatterPattern::kBulkSynchronous, ReduceScatterPattern::kFusedSequential,
      ReduceScatterPattern::kProducerConsumer, ReduceScatterPattern::kWorkgroupSpecialized};
};
template <>
struct OpInfo<AllReducePattern> {
  static constexpr std::string_view section = "gemm_all_reduce", title = "GEMM + all-reduce";
  static constexpr bool split = false;
  static constexpr AllReducePattern patterns[] = {
      AllReducePattern::kBulkSynchronous, AllReducePattern::kOneShot, AllReducePattern::kTwoShot,
      AllReducePattern::kProducerConsumer, AllReducePattern::kWorkgroupSpecialized};
};
template <>
struct OpInfo<AllGatherPattern> {
  static constexpr std::string_view section = "all_gather_gemm", title = "all-gather + GEMM";
  static constexpr bool split = false;
  static constexpr AllGatherPattern patterns[] = {AllGatherPattern::kBulkSynchronous,
                                                  AllGatherPattern::kProducerConsumer,
                                                  AllGatherPattern::kFusedMainloop};
};

/// The op's pattern called `name`; anything else (kAuto's "auto" too) is an iris::Error naming
/// the accepted names.
template <class Pattern>
TunedPattern parse_pattern(std::string_view name) {
  std::string names;
  for (const Pattern p : OpInfo<Pattern>::patterns) {
    if (to_string(p) == name) return p;
    names += (names.empty() ? "" : ", ") + std::string(to_string(p));
  }
  throw Error(Errc::kInvalidArgument, "unknown " + std::string(OpInfo<Pattern>::title) +
                                          " pattern \"" + std::string(name) + "\" (one of " +
                                          names + ")");
}

/// One section of the file, at the index of its op's pattern type in TunedPattern.
struct Section {
  std::string_view name;
  bool split;
  TunedPattern (*parse)(std::string_view);
};

template <std::size_t... I>
constexpr auto make_sections(std::index_sequence<I...>) {
  return std::array<Section, sizeof...(I)>{
      Section{OpInfo<std::variant_alternative_t<I, TunedPattern>>::section,
              OpInfo<std::variant_alternative_t<I, TunedPattern>>::split,
              &parse_pattern<std::variant_alternative_t<I, TunedPattern>>}...};
}
constexpr auto kSections =
    make_sections(std::make_index_sequence<std::variant_size_v<TunedPattern>>{});

std::string section_names() {
  std::string names;
  for (const Section& s : kSections) names += (names.empty() ? "" : ", ") + std::string(s.name);
  return names;
}

double distance(const TuningEntry& e, int m, int n, int k) {
  const auto term = [](int a, int b) { return std::fabs(std::log2(double(a) / double(b))); };
  return term(e.m, m) + term(e.n, n) + term(e.k, k);
}

/// A refusal inside `section`: the reader's sentence (source, what, byte) naming the section.
[[noreturn]] void fail_in(const json::JsonReader& reader, const Section& section, std::size_t at,
                          const std::string& what) {
  reader.fail_at(at, "\"" + std::string(section.name) + "\": " + what);
}

/// The entries of one section.
void parse_section(const json::JsonReader& reader, const Section& section,
                   const json::Json& list_value, std::vector<TuningEntry>& entries) {
  const auto* list = std::get_if<json::JsonArray>(&list_value.value);
  if (list == nullptr)
    fail_in(reader, section, list_value.offset, "the section must be an array of entries");
  for (const json::Json& item : *list) {
    const auto* obj = std::get_if<json::JsonObject>(&item.value);
    if (obj == nullptr) fail_in(reader, section, item.offset, "each entry must be an object");
    TuningEntry e;
    bool has_pattern = false;
    for (const auto& [key, value] : *obj) {
      const auto number = [&] {
        if (!std::holds_alternative<double>(value.value))
          fail_in(reader, section, value.offset, "\"" + key + "\" must be a number");
        const double d = std::get<double>(value.value);
        if (d < 0 || d != std::floor(d) || d > std::numeric_limits<int>::max())
          fail_in(reader, section, value.offset, "\"" + key + "\" must be a whole number >= 0");
        return static_cast<int>(d);
      };
      const auto positive = [&] {
        const int v = number();
        if (v == 0)
          fail_in(reader, section, value.offset, "\"" + key + "\" must be a positive int");
        return v;
      };
      if (key == "world") {
        e.world = positive();
      } else if (key == "m") {
        e.m = positive();
      } else if (key == "n") {
        e.n = positive();
      } else if (key == "k") {
        e.k = positive();
      } else if (key == "pattern") {
        const auto* name = std::get_if<std::string>(&value.value);
        if (name == nullptr) fail_in(reader, section, value.offset, "\"pattern\" must be a string");
        try {
          e.pattern = section.parse(*name);
        } catch (const Error& error) {
          fail_in(reader, section, value.offset, error.message());
        }
        has_pattern = true;
      } else if (key == "gemm_sms" || key == "comm_blocks") {
        if (!section.split)
          fail_in(reader, section, value.offset,
                  "\"" + key + "\" is not a field of this op's entries (only " +
                      std::string(kSections[0].name) + " takes an SM split)");
        const int v = number();
        if (v > 4096)
          fail_in(reader, section, value.offset, "\"" + key + "\" must be at most 4096");
        if (key == "gemm_sms" && v == 1)
          fail_in(reader, section, value.offset,
                  "\"gemm_sms\" 1 cannot hold the GEMM's 2-CTA clusters (0: the op's split, or "
                  "2 or more)");
        (key == "gemm_sms" ? e.gemm_sms : e.comm_blocks) = v;
      } else {
        fail_in(reader, section, value.offset, "unknown key \"" + key + "\"");
      }
    }
    if (e.world == 0 || e.m == 0 || e.n == 0 || e.k == 0)
      fail_in(reader, section, item.offset,
              "entry without all of \"world\", \"m\", \"n\" and \"k\"");
    if (!has_pattern) fail_in(reader, section, item.offset, "entry without \"pattern\"");
    entries.push_back(e);
  }
}
}  // namespace

std::string_view section_of(const TunedPattern& pattern) {
  return kSections[pattern.index()].name;
}

const OpsTuning& OpsTuning::defaults() {
  // GEMM + all-scatter: fused sequential everywhere until a run with one GPU per rank says
  // otherwise: it needs no SM split and no second stream, moves every tile once while the GEMM
  // still runs, and was the fastest or within a few percent of it with 2 and 4 ranks sharing
  // one H200 (docs/ops.md). The other ops have no entries: their rules decide.
  static const OpsTuning table(std::vector<TuningEntry>{
      {2, 4096, 4096, 14336, AllScatterPattern::kFusedSequential},
      {4, 4096, 4096, 14336, AllScatterPattern::kFusedSequential},
      {8, 4096, 4096, 14336, AllScatterPattern::kFusedSequential},
  });
  return table;
}

const OpsTuning& OpsTuning::current() {
  static const OpsTuning table = [] {
    if (auto path = iris::env::get(kOpsTuningEnv)) return from_file(*path);
    return defaults();
  }();
  return table;
}

OpsTuning OpsTuning::parse(std::string_view text, std::string_view source) {
  json::JsonReader reader(text, source);
  const json::Json doc = reader.document();
  const auto& top = json::as<json::JsonObject>(reader, doc, "the table must be a JSON object");
  for (const auto& [key, value] : top) {
    bool known = false;
    for (const Section& section : kSections) known = known || key == section.name;
    if (!known)
      reader.fail_at(value.offset,
                     "unknown section \"" + key + "\" (one of " + section_names() + ")");
  }
  std::vector<TuningEntry> entries;
  // In the sections' order, whatever the file's (JsonObject is sorted by name).
  for (const Section& section : kSections)
    if (const auto it = top.find(std::string(section.name)); it != top.end())
      parse_section(reader, section, it->second, entries);
  return OpsTuning(std::move(entries));
}

OpsTuning OpsTuning::from_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw Error(Errc::kInvalidArgument,
                "iris::ops: cannot read the tuning table \"" + path + "\" (IRIS_OPS_TUNING)");
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

template <class Pattern>
TunedChoice<Pattern> OpsTuning::lookup(int world, int m, int n, int k) const {
  if (m <= 0 || n <= 0 || k <= 0) return {};
  const TuningEntry* best = nullptr;
  double best_distance = 0;
  for (const auto& e : entries_) {
    if (e.world != world || !std::holds_alternative<Pattern>(e.pattern)) continue;
    const double d = distance(e, m, n, k);
    if (best == nullptr || d < best_distance) {
      best = &e;
      best_distance = d;
    }
  }
  if (best == nullptr) return {};
  return {std::get<Pattern>(best->pattern), best->gemm_sms, best->comm_blocks};
}

template TunedChoice<AllScatterPattern> OpsTuning::lookup(int, int, int, int) const;
template TunedChoice<ReduceScatterPattern> OpsTuning::lookup(int, int, int, int) const;
template TunedChoice<AllReducePattern> OpsTuning::lookup(int, int, int, int) const;
template TunedChoice<AllGatherPattern> OpsTuning::lookup(int, int, int, int) const;

OpsTuning OpsTuning::with_measured(const TunedPattern& op, int world,
                                   std::vector<TuningEntry> entries) const {
  for (const TuningEntry& e : entries) {
    if (e.pattern.index() != op.index() || e.world != world)
      throw Error(Errc::kInvalidArgument,
                  "iris::ops: an entry of \"" + std::string(section_of(e.pattern)) + "\" for " +
                      std::to_string(e.world) + " ranks among the entries of \"" +
                      std::string(section_of(op)) + "\" for " + std::to_string(world));
    if (std::visit([](auto p) { return p == decltype(p)::kAuto; }, e.pattern))
      throw Error(Errc::kInvalidArgument, "iris::ops: an entry of \"" +
                                              std::string(section_of(op)) +
                                              "\" without a pattern (kAuto)");
  }
  std::vector<TuningEntry> kept;
  for (const TuningEntry& e : entries_)
    if (e.pattern.index() != op.index() || e.world != world) kept.push_back(e);
  kept.insert(kept.end(), entries.begin(), entries.end());
  return OpsTuning(std::move(kept));
}

std::string OpsTuning::to_json() const {
  std::string out = "{";
  for (std::size_t s = 0; s < kSections.size(); ++s) {
    std::string section;
    for (const TuningEntry& e : entries_) {
      if (e.pattern.index() != s) continue;
      const std::string pattern(std::visit([](auto p) { return to_string(p); }, e.pattern));
      section += (section.empty() ? "\n  " : ",\n  ");
      section += "{\"world\": " + std::to_string(e.world) + ", \"m\": " + std::to_string(e.m) +
                 ", \"n\": " + std::to_string(e.n) + ", \"k\": " + std::to_string(e.k) +
                 ", \"pattern\": \"" + pattern + "\"";
      if (kSections[s].split)
        section += ", \"gemm_sms\": " + std::to_string(e.gemm_sms) +
                   ", \"comm_blocks\": " + std::to_string(e.comm_blocks);
      section += "}";
    }
    if (section.empty()) continue;
    out += (out.size() > 1 ? ",\n \"" : "\"") + std::string(kSections[s].name) + "\": [" + section +
           "]";
  }
  out += "}\n";
  return out;
}

void write_tuning_entries(const std::string& path, const TunedPattern& op, int world,
                          std::vector<TuningEntry> entries) {
  const OpsTuning old = std::filesystem::exists(path) ? OpsTuning::from_file(path) : OpsTuning{};
  const std::string text = old.with_measured(op, world, std::move(entries)).to_json();
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.flush();
  if (!out) throw Error(Errc::kSystem, "iris::ops: cannot write the tuning table \"" + path + "\"");
}

}  // namespace iris::ops::detail
