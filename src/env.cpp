#include "iris/host/env.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "iris/host/error.hpp"

namespace iris::env {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

[[noreturn]] void bad(std::string_view what, std::string_view text, std::string_view expected) {
  throw Error(Errc::kInvalidArgument, std::string(what) + ": cannot parse '" + std::string(text) +
                                          "' (expected " + std::string(expected) + ")");
}

}  // namespace

std::optional<std::string> get(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || value[0] == '\0') return std::nullopt;
  return std::string(value);
}

std::size_t parse_size(std::string_view text, std::string_view what) {
  constexpr std::string_view kExpected = "a byte count such as 1073741824, 512MiB or 2G";
  const std::string_view body = trim(text);
  unsigned long long number = 0;
  const auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), number);
  if (ec != std::errc() || end == body.data()) bad(what, text, kExpected);
  std::string suffix = lower(trim(std::string_view(end, body.data() + body.size() - end)));
  if (suffix.ends_with("ib")) suffix.resize(suffix.size() - 2);
  else if (suffix.size() > 1 && suffix.ends_with("b")) suffix.resize(suffix.size() - 1);
  int shift = 0;
  if (suffix.empty() || suffix == "b") shift = 0;
  else if (suffix == "k") shift = 10;
  else if (suffix == "m") shift = 20;
  else if (suffix == "g") shift = 30;
  else if (suffix == "t") shift = 40;
  else bad(what, text, kExpected);
  if (number > (std::numeric_limits<unsigned long long>::max() >> shift)) bad(what, text, "a size that fits in 64 bits");
  return static_cast<std::size_t>(number << shift);
}

long long parse_int(std::string_view text, std::string_view what) {
  const std::string_view body = trim(text);
  long long value = 0;
  const auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), value);
  if (ec != std::errc() || end != body.data() + body.size() || body.empty()) bad(what, text, "a whole number");
  return value;
}

std::chrono::nanoseconds parse_seconds(std::string_view text, std::string_view what) {
  const std::string body(trim(text));
  char* end = nullptr;
  const double seconds = std::strtod(body.c_str(), &end);
  if (body.empty() || end != body.c_str() + body.size() || !std::isfinite(seconds) || seconds < 0)
    bad(what, text, "a non-negative number of seconds");
  return std::chrono::nanoseconds(static_cast<long long>(seconds * 1e9));
}

bool parse_flag(std::string_view text, std::string_view what) {
  const std::string value = lower(trim(text));
  if (value == "1" || value == "true" || value == "yes" || value == "on") return true;
  if (value == "0" || value == "false" || value == "no" || value == "off") return false;
  bad(what, text, "one of 0, 1, true, false, yes, no, on, off");
}

std::size_t get_size(const char* name, std::size_t fallback) {
  const auto value = get(name);
  return value ? parse_size(*value, name) : fallback;
}

long long get_int(const char* name, long long fallback) {
  const auto value = get(name);
  return value ? parse_int(*value, name) : fallback;
}

std::chrono::nanoseconds get_seconds(const char* name, std::chrono::nanoseconds fallback) {
  const auto value = get(name);
  return value ? parse_seconds(*value, name) : fallback;
}

bool get_flag(const char* name, bool fallback) {
  const auto value = get(name);
  return value ? parse_flag(*value, name) : fallback;
}

}  // namespace iris::env
