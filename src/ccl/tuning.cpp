// Names of the ccl vocabulary, the selection table and its JSON form.
#include "iris/ccl/tuning.hpp"

#include <cctype>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <variant>

#include "iris/host/error.hpp"

namespace iris::ccl {

namespace {

// clang-format off
constexpr std::string_view kDataTypeNames[] = {"float32", "float16", "bfloat16", "int32", "int64", "uint8"};
constexpr std::string_view kReduceOpNames[] = {"sum", "prod", "min", "max", "avg"};
constexpr std::string_view kCollectiveNames[] = {
    "all_reduce", "reduce_scatter", "all_gather", "all_to_all", "all_to_allv", "broadcast",
    "reduce", "gather", "scatter", "send_recv", "barrier"};
constexpr std::string_view kAlgorithmNames[] = {"auto", "one_shot", "one_shot_pull", "two_shot", "pull", "push", "ring"};
// clang-format on

template <std::size_t N>
std::string_view name_of(const std::string_view (&names)[N], int i) {
  return i >= 0 && i < static_cast<int>(N) ? names[i] : std::string_view("?");
}

std::string quoted(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

// ---- a small JSON reader: objects, arrays, strings, numbers, true/false/null -------------------

struct Json;
using JsonObject = std::map<std::string, Json>;
using JsonArray = std::vector<Json>;
struct Json {
  std::variant<std::nullptr_t, bool, double, std::string, JsonArray, JsonObject> value;
  std::size_t offset = 0;  // where it starts in the text, for messages
};

class JsonReader {
 public:
  JsonReader(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  Json document() {
    Json v = value();
    skip_space();
    if (pos_ != text_.size()) fail("text after the end of the JSON value");
    return v;
  }

  [[noreturn]] void fail(const std::string& what) const { fail_at(pos_, what); }
  [[noreturn]] void fail_at(std::size_t at, const std::string& what) const {
    throw Error(Errc::kInvalidArgument,
                std::string(source_) + ": " + what + " at byte " + std::to_string(at));
  }

 private:
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool take(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!take(c)) fail(std::string("expected '") + c + "'");
  }
  std::string string_body() {
    expect('"');
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      char c = text_[pos_++];
      if (c == '\\') {
        if (pos_ >= text_.size()) fail("unfinished escape");
        const char e = text_[pos_++];
        switch (e) {
          case '"':
          case '\\':
          case '/':
            out += e;
            break;
          case 'n':
            out += '\n';
            break;
          case 't':
            out += '\t';
            break;
          default:
            fail(std::string("unsupported escape \\") + e);
        }
      } else {
        out += c;
      }
    }
    if (pos_ >= text_.size()) fail("unfinished string");
    ++pos_;
    return out;
  }
  Json value() {
    skip_space();
    Json v;
    v.offset = pos_;
    if (pos_ >= text_.size()) fail("unexpected end of text");
    const char c = text_[pos_];
    if (c == '{') {
      ++pos_;
      JsonObject object;
      if (!take('}')) {
        do {
          skip_space();
          const std::size_t at = pos_;
          std::string key = string_body();
          expect(':');
          if (object.count(key)) fail_at(at, "duplicate key \"" + key + "\"");
          object.emplace(std::move(key), value());
        } while (take(','));
        expect('}');
      }
      v.value = std::move(object);
    } else if (c == '[') {
      ++pos_;
      JsonArray array;
      if (!take(']')) {
        do array.push_back(value());
        while (take(','));
        expect(']');
      }
      v.value = std::move(array);
    } else if (c == '"') {
      v.value = string_body();
    } else if (text_.substr(pos_, 4) == "true") {
      pos_ += 4;
      v.value = true;
    } else if (text_.substr(pos_, 5) == "false") {
      pos_ += 5;
      v.value = false;
    } else if (text_.substr(pos_, 4) == "null") {
      pos_ += 4;
      v.value = nullptr;
    } else if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
      std::size_t end = pos_ + 1;
      while (end < text_.size() &&
             (std::isdigit(static_cast<unsigned char>(text_[end])) || text_[end] == '.' ||
              text_[end] == 'e' || text_[end] == 'E' || text_[end] == '+' || text_[end] == '-'))
        ++end;
      const std::string number(text_.substr(pos_, end - pos_));
      char* stop = nullptr;
      const double d = std::strtod(number.c_str(), &stop);
      if (stop != number.c_str() + number.size()) fail("malformed number " + number);
      pos_ = end;
      v.value = d;
    } else {
      fail(std::string("unexpected character '") + c + "'");
    }
    return v;
  }

  std::string_view text_;
  std::string_view source_;
  std::size_t pos_ = 0;
};

template <class T>
const T& as(const JsonReader& reader, const Json& v, const char* what) {
  if (const T* p = std::get_if<T>(&v.value)) return *p;
  reader.fail_at(v.offset, what);
}

std::uint64_t whole_number(const JsonReader& reader, const Json& v, const std::string& key) {
  const std::string what = "\"" + key + "\" must be a number";
  const double d = as<double>(reader, v, what.c_str());
  if (d < 0 || d != static_cast<double>(static_cast<std::uint64_t>(d)) || d > 1.8e19)
    reader.fail_at(v.offset, "\"" + key + "\" must be a whole number >= 0");
  return static_cast<std::uint64_t>(d);
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
             algorithm == Algorithm::kTwoShot;
    case Collective::kAllGather:
      return algorithm == Algorithm::kPull || algorithm == Algorithm::kPush ||
             algorithm == Algorithm::kRing;
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
  // Measured on an H200 with the ranks sharing it under MPS (ccl_bench, graph mode, float sums):
  // packets win up to 512 KiB with 2 ranks and up to 64 KiB with 8, two-shot above; push
  // all-gather wins at mid sizes. 3-4 ranks sit between (not measured: 128 KiB). `ccl_bench
  // --tune` measures a machine's own table.
  std::vector<TuningEntry> e;
  e.push_back({.collective = Collective::kAllReduce,
               .team_max = 2,
               .bytes_max = 512 << 10,
               .algorithm = Algorithm::kOneShot});
  e.push_back({.collective = Collective::kAllReduce,
               .team_max = 4,
               .bytes_max = 128 << 10,
               .algorithm = Algorithm::kOneShot});
  e.push_back({.collective = Collective::kAllReduce,
               .bytes_max = 64 << 10,
               .algorithm = Algorithm::kOneShot});
  e.push_back({.collective = Collective::kAllReduce, .algorithm = Algorithm::kTwoShot});
  e.push_back(
      {.collective = Collective::kAllGather, .bytes_max = 16 << 20, .algorithm = Algorithm::kPush});
  e.push_back({.collective = Collective::kAllGather, .algorithm = Algorithm::kPull});
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
