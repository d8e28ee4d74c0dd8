// Names of the ccl vocabulary, the selection table and its JSON form.
#include "iris/ccl/tuning.hpp"

#include <cctype>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <variant>

#include "detail/json.hpp"
#include "iris/host/error.hpp"

namespace iris::ccl {

namespace {

using iris::detail::json::as;
using iris::detail::json::Json;
using iris::detail::json::JsonArray;
using iris::detail::json::JsonObject;
using iris::detail::json::JsonReader;
using iris::detail::json::whole_number;

// clang-format off
constexpr std::string_view kDataTypeNames[] = {"float32", "float16", "bfloat16", "int32", "int64", "uint8"};
constexpr std::string_view kReduceOpNames[] = {"sum", "prod", "min", "max", "avg"};
constexpr std::string_view kCollectiveNames[] = {
    "all_reduce", "reduce_scatter", "all_gather", "all_to_all", "all_to_allv", "broadcast",
    "reduce", "gather", "scatter", "send_recv", "barrier"};
constexpr std::string_view kAlgorithmNames[] = {"auto", "one_shot", "one_shot_pull", "one_shot_push", "two_shot", "two_shot_packets", "pull", "push", "ring"};
// clang-format on
static_assert(std::size(kAlgorithmNames) == kAlgorithmCount &&
              std::size(kCollectiveNames) == kCollectiveCount);

template <std::size_t N>
std::string_view name_of(const std::string_view (&names)[N], int i) {
  return i >= 0 && i < static_cast<int>(N) ? names[i] : std::string_view("?");
}

std::string quoted(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

}  // namespace

std::string_view to_string(DataType type) noexcept {
  return name_of(kDataTypeNames, static_cast<int>(type));
}
std::string_view to_string(ReduceOp op) noexcept {
  return name_of(kReduceOpNames, static_cast<int>(op));
}
std::string_view to_string(Collective collective) noexcept {
  return name_of(kCollectiveNames, static_cast<int>(collective));
}
std::string_view to_string(Algorithm algorithm) noexcept {
  return name_of(kAlgorithmNames, static_cast<int>(algorithm));
}

Algorithm parse_algorithm(std::string_view name) {
  for (int i = 0; i < kAlgorithmCount; ++i)
    if (kAlgorithmNames[i] == name) return static_cast<Algorithm>(i);
  std::string known;
  for (auto n : kAlgorithmNames) known += (known.empty() ? "" : ", ") + std::string(n);
  throw Error(Errc::kInvalidArgument,
              "iris::ccl: unknown algorithm \"" + std::string(name) + "\" (known: " + known + ")");
}

Collective parse_collective(std::string_view name) {
  for (int i = 0; i < kCollectiveCount; ++i)
    if (kCollectiveNames[i] == name) return static_cast<Collective>(i);
  std::string known;
  for (auto n : kCollectiveNames) known += (known.empty() ? "" : ", ") + std::string(n);
  throw Error(Errc::kInvalidArgument,
              "iris::ccl: unknown collective \"" + std::string(name) + "\" (known: " + known + ")");
}

bool collective_has(Collective collective, Algorithm algorithm) {
  if (algorithm == Algorithm::kAuto) return true;
  switch (collective) {
    case Collective::kAllReduce:
      return algorithm == Algorithm::kOneShot || algorithm == Algorithm::kOneShotPull ||
             algorithm == Algorithm::kOneShotPush || algorithm == Algorithm::kTwoShot ||
             algorithm == Algorithm::kTwoShotPackets;
    case Collective::kAllGather:
      return algorithm == Algorithm::kPull || algorithm == Algorithm::kPush ||
             algorithm == Algorithm::kRing;
    case Collective::kReduceScatter:
      return algorithm == Algorithm::kPull || algorithm == Algorithm::kRing;
    case Collective::kAllToAll:
    case Collective::kGather:
    case Collective::kReduce:
      return algorithm == Algorithm::kPull || algorithm == Algorithm::kPush;
    default:
      return algorithm == Algorithm::kPull;
  }
}

ForcedAlgorithms parse_forced_algorithms(std::string_view text) {
  ForcedAlgorithms forced;
  forced.fill(Algorithm::kAuto);
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find(',', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view part = text.substr(pos, end - pos);
    pos = end + 1;
    if (part.empty()) continue;
    const std::size_t eq = part.find('=');
    if (eq == std::string_view::npos)
      throw Error(Errc::kInvalidArgument, std::string(kAlgorithmEnv) + ": \"" + std::string(part) +
                                              "\" is not collective=algorithm");
    const Collective c = parse_collective(part.substr(0, eq));
    const Algorithm a = parse_algorithm(part.substr(eq + 1));
    if (!collective_has(c, a))
      throw Error(Errc::kInvalidArgument, std::string(kAlgorithmEnv) + ": " +
                                              std::string(to_string(c)) + " has no algorithm " +
                                              std::string(to_string(a)));
    forced[static_cast<int>(c)] = a;
  }
  return forced;
}

TuningTable TuningTable::defaults() {
  // Measured with the ranks sharing one GPU under MPS (ccl_bench, graph mode, float sums). On an
  // H200: packets win up to 512 KiB with 2 ranks and up to 64 KiB with 8, two-shot above; push
  // all-gather wins at mid sizes. On an H100 (one_shot_push was measured there only): the push
  // takes over from the packets above 32 KiB with 8 ranks, 128 KiB with 4 and 512 KiB with 2,
  // up to 256 KiB, 512 KiB and 1 MiB, where a pull or two-shot catches up. The rings
  // (all_gather, reduce_scatter) are for links where a rank should talk to one peer at a time;
  // ranks sharing one GPU share its HBM, so they gain nothing there and the table leaves them
  // out (reduce_scatter: pull). `ccl_bench --tune` measures a machine's own table.
  std::vector<TuningEntry> e;
  auto all_reduce = [&](int team_max, std::size_t bytes_max, Algorithm algorithm) {
    e.push_back({.collective = Collective::kAllReduce,
                 .team_max = team_max,
                 .bytes_max = bytes_max,
                 .algorithm = algorithm});
  };
  all_reduce(2, 512 << 10, Algorithm::kOneShot);
  all_reduce(2, 1 << 20, Algorithm::kOneShotPush);
  all_reduce(4, 128 << 10, Algorithm::kOneShot);
  all_reduce(4, 512 << 10, Algorithm::kOneShotPush);
  constexpr int kAnyTeam = std::numeric_limits<int>::max();
  all_reduce(kAnyTeam, 32 << 10, Algorithm::kOneShot);
  all_reduce(kAnyTeam, 256 << 10, Algorithm::kOneShotPush);
  e.push_back({.collective = Collective::kAllReduce, .algorithm = Algorithm::kTwoShot});
  e.push_back(
      {.collective = Collective::kAllGather, .bytes_max = 16 << 20, .algorithm = Algorithm::kPush});
  e.push_back({.collective = Collective::kAllGather, .algorithm = Algorithm::kPull});
  // gather: every member writes its own part into the root's output, so every member's blocks
  // move bytes, where the pull leaves it all to the root's (half the GPU's blocks, at 2 ranks
  // sharing one; over links the root's inbound bandwidth bounds both).
  e.push_back({.collective = Collective::kGather, .algorithm = Algorithm::kPush});
  // reduce: the same for the reduction, every member reducing a shard into the root's output,
  // above 16 KiB; up to it the pull, whose root alone reads the n small inputs, saves the
  // members' remote reads and writes (measured on an H100 at 2, 4 and 8 ranks).
  e.push_back(
      {.collective = Collective::kReduce, .bytes_max = 16 << 10, .algorithm = Algorithm::kPull});
  e.push_back({.collective = Collective::kReduce, .algorithm = Algorithm::kPush});
  return TuningTable(std::move(e));
}

TuningTable TuningTable::parse(std::string_view json, std::string_view source) {
  JsonReader reader(json, source);
  const Json doc = reader.document();
  const auto& top = as<JsonObject>(reader, doc, "the table must be a JSON object");
  const auto it = top.find("entries");
  if (it == top.end()) reader.fail_at(doc.offset, "missing \"entries\"");
  const auto& list = as<JsonArray>(reader, it->second, "\"entries\" must be an array");
  std::vector<TuningEntry> entries;
  for (const Json& item : list) {
    const auto& obj = as<JsonObject>(reader, item, "each entry must be an object");
    TuningEntry entry;
    bool has_collective = false, has_algorithm = false;
    for (const auto& [key, value] : obj) {
      if (key == "collective") {
        try {
          entry.collective =
              parse_collective(as<std::string>(reader, value, "\"collective\" must be a string"));
        } catch (const Error& error) {
          reader.fail_at(value.offset, error.message());
        }
        has_collective = true;
      } else if (key == "algorithm") {
        try {
          entry.algorithm =
              parse_algorithm(as<std::string>(reader, value, "\"algorithm\" must be a string"));
        } catch (const Error& error) {
          reader.fail_at(value.offset, error.message());
        }
        has_algorithm = true;
      } else if (key == "team_min") {
        entry.team_min = static_cast<int>(whole_number(reader, value, key));
      } else if (key == "team_max") {
        entry.team_max = static_cast<int>(whole_number(reader, value, key));
      } else if (key == "bytes_min") {
        entry.bytes_min = whole_number(reader, value, key);
      } else if (key == "bytes_max") {
        entry.bytes_max = whole_number(reader, value, key);
      } else if (key == "max_blocks") {
        entry.max_blocks = static_cast<int>(whole_number(reader, value, key));
      } else if (key == "chunk_bytes") {
        entry.chunk_bytes = whole_number(reader, value, key);
      } else {
        reader.fail_at(value.offset, "unknown key \"" + key + "\"");
      }
    }
    if (!has_collective) reader.fail_at(item.offset, "entry without \"collective\"");
    if (!has_algorithm) reader.fail_at(item.offset, "entry without \"algorithm\"");
    if (!collective_has(entry.collective, entry.algorithm))
      reader.fail_at(item.offset, std::string(to_string(entry.collective)) + " has no algorithm " +
                                      std::string(to_string(entry.algorithm)));
    if (entry.team_min > entry.team_max || entry.bytes_min > entry.bytes_max)
      reader.fail_at(item.offset, "entry with an empty range (min > max)");
    entries.push_back(entry);
  }
  return TuningTable(std::move(entries));
}

TuningTable TuningTable::from_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw Error(Errc::kInvalidArgument, "iris::ccl: cannot read the tuning table \"" + path + "\"");
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

std::string TuningTable::to_json() const {
  std::string out = "{\"entries\": [\n";
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    const TuningEntry& e = entries_[i];
    const TuningEntry unbounded;
    out += "  {\"collective\": " + quoted(to_string(e.collective));
    if (e.team_min != unbounded.team_min) out += ", \"team_min\": " + std::to_string(e.team_min);
    if (e.team_max != unbounded.team_max) out += ", \"team_max\": " + std::to_string(e.team_max);
    if (e.bytes_min != unbounded.bytes_min)
      out += ", \"bytes_min\": " + std::to_string(e.bytes_min);
    if (e.bytes_max != unbounded.bytes_max)
      out += ", \"bytes_max\": " + std::to_string(e.bytes_max);
    out += ", \"algorithm\": " + quoted(to_string(e.algorithm));
    if (e.max_blocks != 0) out += ", \"max_blocks\": " + std::to_string(e.max_blocks);
    if (e.chunk_bytes != 0) out += ", \"chunk_bytes\": " + std::to_string(e.chunk_bytes);
    out += i + 1 < entries_.size() ? "},\n" : "}\n";
  }
  return out + "]}\n";
}

std::vector<const TuningEntry*> TuningTable::candidates(Collective collective, int team_size,
                                                        std::size_t bytes) const {
  std::vector<const TuningEntry*> out;
  for (const TuningEntry& e : entries_)
    if (e.matches(collective, team_size, bytes)) out.push_back(&e);
  return out;
}

}  // namespace iris::ccl
