// A small JSON reader (objects, arrays, strings, numbers, true/false/null) for the tuning
// tables of iris::ccl (IRIS_CCL_TUNING) and iris::ops (IRIS_OPS_TUNING). Not public. Errors
// are iris::Error(kInvalidArgument) naming the source and the byte offset.
#pragma once

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "iris/host/error.hpp"

namespace iris::detail::json {

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
inline const T& as(const JsonReader& reader, const Json& v, const char* what) {
  if (const T* p = std::get_if<T>(&v.value)) return *p;
  reader.fail_at(v.offset, what);
}

inline std::uint64_t whole_number(const JsonReader& reader, const Json& v, const std::string& key) {
  const std::string what = "\"" + key + "\" must be a number";
  const double d = as<double>(reader, v, what.c_str());
  if (d < 0 || d != static_cast<double>(static_cast<std::uint64_t>(d)) || d > 1.8e19)
    reader.fail_at(v.offset, "\"" + key + "\" must be a whole number >= 0");
  return static_cast<std::uint64_t>(d);
}

}  // namespace iris::detail::json
