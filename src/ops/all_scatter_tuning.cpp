// GemmAllScatter's kAuto table: the compiled-in defaults, IRIS_OPS_TUNING's JSON form, lookup.
#include "iris/ops/detail/all_scatter_tuning.hpp"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "detail/json.hpp"
#include "iris/host/env.hpp"
#include "iris/host/error.hpp"

namespace iris::ops::detail {

namespace {
namespace json = iris::detail::json;

constexpr AllScatterPattern kNamedPatterns[] = {
    AllScatterPattern::kBulkSynchronous, AllScatterPattern::kFusedSequential,
    AllScatterPattern::kProducerConsumer, AllScatterPattern::kWorkgroupSpecialized};

double distance(const AllScatterTuningEntry& e, int m, int n, int k) {
  const auto term = [](int a, int b) { return std::fabs(std::log2(double(a) / double(b))); };
  return term(e.m, m) + term(e.n, n) + term(e.k, k);
}
}  // namespace

AllScatterPattern parse_all_scatter_pattern(std::string_view name) {
  std::string names;
  for (const AllScatterPattern p : kNamedPatterns) {
    if (to_string(p) == name) return p;
    names += (names.empty() ? "" : ", ") + std::string(to_string(p));
  }
  throw Error(Errc::kInvalidArgument, "unknown GEMM + all-scatter pattern \"" + std::string(name) +
                                          "\" (one of " + names + ")");
}

const AllScatterTuning& AllScatterTuning::defaults() {
  // Fused sequential everywhere until a run with one GPU per rank says otherwise: it needs no SM
  // split and no second stream, moves every tile once while the GEMM still runs, and was the
  // fastest or within a few percent of it with 2 and 4 ranks sharing one H200 (docs/ops.md).
  static const AllScatterTuning table(std::vector<AllScatterTuningEntry>{
      {2, 4096, 4096, 14336, {AllScatterPattern::kFusedSequential}},
      {4, 4096, 4096, 14336, {AllScatterPattern::kFusedSequential}},
      {8, 4096, 4096, 14336, {AllScatterPattern::kFusedSequential}},
  });
  return table;
}

const AllScatterTuning& AllScatterTuning::current() {
  static const AllScatterTuning table = [] {
    if (auto path = iris::env::get(kAllScatterTuningEnv)) return from_file(*path);
    return defaults();
  }();
  return table;
}

AllScatterTuning AllScatterTuning::parse(std::string_view text, std::string_view source) {
  json::JsonReader reader(text, source);
  const json::Json doc = reader.document();
  const auto& top = json::as<json::JsonObject>(reader, doc, "the table must be a JSON object");
  const auto it = top.find("gemm_all_scatter");
  if (it == top.end()) reader.fail_at(doc.offset, "missing \"gemm_all_scatter\"");
  const auto& list =
      json::as<json::JsonArray>(reader, it->second, "\"gemm_all_scatter\" must be an array");
  std::vector<AllScatterTuningEntry> entries;
  for (const json::Json& item : list) {
    const auto& obj = json::as<json::JsonObject>(reader, item, "each entry must be an object");
    AllScatterTuningEntry e;
    bool has_pattern = false;
    for (const auto& [key, value] : obj) {
      const auto positive = [&] {
        const auto v = json::whole_number(reader, value, key);
        if (v == 0 || v > std::uint64_t(std::numeric_limits<int>::max()))
          reader.fail_at(value.offset, "\"" + key + "\" must be a positive int");
        return static_cast<int>(v);
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
        try {
          e.choice.pattern = parse_all_scatter_pattern(
              json::as<std::string>(reader, value, "\"pattern\" must be a string"));
        } catch (const Error& error) {
          reader.fail_at(value.offset, error.message());
        }
        has_pattern = true;
      } else if (key == "gemm_sms" || key == "comm_blocks") {
        const auto v = json::whole_number(reader, value, key);
        if (v > 4096) reader.fail_at(value.offset, "\"" + key + "\" must be at most 4096");
        (key == "gemm_sms" ? e.choice.gemm_sms : e.choice.comm_blocks) = static_cast<int>(v);
      } else {
        reader.fail_at(value.offset, "unknown key \"" + key + "\"");
      }
    }
    if (e.world == 0 || e.m == 0 || e.n == 0 || e.k == 0)
      reader.fail_at(item.offset, "entry without all of \"world\", \"m\", \"n\" and \"k\"");
    if (!has_pattern) reader.fail_at(item.offset, "entry without \"pattern\"");
    entries.push_back(e);
  }
  return AllScatterTuning(std::move(entries));
}

AllScatterTuning AllScatterTuning::from_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw Error(Errc::kInvalidArgument,
                "iris::ops: cannot read the tuning table \"" + path + "\" (IRIS_OPS_TUNING)");
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

AllScatterChoice AllScatterTuning::lookup(int world, int m, int n, int k) const {
  const AllScatterTuningEntry* best = nullptr;
  double best_distance = 0;
  for (const auto& e : entries_) {
    if (e.world != world) continue;
    const double d = distance(e, m, n, k);
    if (best == nullptr || d < best_distance) {
      best = &e;
      best_distance = d;
    }
  }
  return best ? best->choice : AllScatterChoice{AllScatterPattern::kAuto};
}

AllScatterChoice AllScatterTuning::choose(int world, int m, int n, int k) const {
  if (m <= 0 || n <= 0 || k <= 0) return AllScatterChoice{};
  if (auto c = lookup(world, m, n, k); c.pattern != AllScatterPattern::kAuto) return c;
  if (auto c = defaults().lookup(world, m, n, k); c.pattern != AllScatterPattern::kAuto) return c;
  return AllScatterChoice{};
}

std::string AllScatterTuning::to_json() const {
  std::string out = "{\"gemm_all_scatter\": [";
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    const auto& e = entries_[i];
    out += (i ? ",\n  " : "\n  ");
    out += "{\"world\": " + std::to_string(e.world) + ", \"m\": " + std::to_string(e.m) +
           ", \"n\": " + std::to_string(e.n) + ", \"k\": " + std::to_string(e.k) +
           ", \"pattern\": \"" + std::string(to_string(e.choice.pattern)) +
           "\", \"gemm_sms\": " + std::to_string(e.choice.gemm_sms) +
           ", \"comm_blocks\": " + std::to_string(e.choice.comm_blocks) + "}";
  }
  out += "]}\n";
  return out;
}

}  // namespace iris::ops::detail
