#include "iris/host/env.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "detail/log.hpp"
#include "detail/socket.hpp"
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
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
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
  constexpr std::string_view kExpected =
      "a byte count: digits with an optional K, M, G or T (powers of 1024, optionally followed by "
      "iB or B), such as 1073741824, 512MiB or 2G";
  const std::string_view body = trim(text);
  unsigned long long number = 0;
  const auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), number);
  if (ec == std::errc::result_out_of_range) bad(what, text, "a size that fits in 64 bits");
  if (ec != std::errc() || end == body.data()) bad(what, text, kExpected);
  const std::string suffix = lower(trim(std::string_view(end, body.data() + body.size() - end)));
  // Exactly one unit letter, then nothing, "b" or "ib" ("1bb" and "1kibib" are typos).
  int shift = 0;
  std::string_view rest = suffix;
  if (!rest.empty() && rest != "b") {
    switch (rest.front()) {
      case 'k':
        shift = 10;
        break;
      case 'm':
        shift = 20;
        break;
      case 'g':
        shift = 30;
        break;
      case 't':
        shift = 40;
        break;
      default:
        bad(what, text, kExpected);
    }
    rest.remove_prefix(1);
    if (!rest.empty() && rest != "b" && rest != "ib") bad(what, text, kExpected);
  }
  if (number > (std::numeric_limits<unsigned long long>::max() >> shift))
    bad(what, text, "a size that fits in 64 bits");
  return static_cast<std::size_t>(number << shift);
}

long long parse_int(std::string_view text, std::string_view what) {
  const std::string_view body = trim(text);
  long long value = 0;
  const auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), value);
  if (ec != std::errc() || end != body.data() + body.size() || body.empty())
    bad(what, text, "a whole number");
  return value;
}

std::chrono::nanoseconds parse_seconds(std::string_view text, std::string_view what) {
  constexpr std::string_view kExpected =
      "a decimal number of seconds such as 30, 0.5 or 1e3, not negative and at most 9.2e9 "
      "(292 years)";
  const std::string_view body = trim(text);
  // Decimal only: from_chars in the general format takes neither hex ("0x10") nor a leading
  // '+'; infinities and NaN are caught below.
  double seconds = 0;
  const auto [end, ec] =
      std::from_chars(body.data(), body.data() + body.size(), seconds, std::chars_format::general);
  // Anything from_chars cannot take whole, NaN, infinity, a negative number, and more
  // nanoseconds than a 64-bit count holds (1e10 s) are refused.
  constexpr double kMaxSeconds = 9.2e9;
  if (body.empty() || ec != std::errc() || end != body.data() + body.size() ||
      !(seconds >= 0 && seconds <= kMaxSeconds))
    bad(what, text, kExpected);
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

// ---------------------------------------------------------------------------------------------
// check_environment

namespace {

[[noreturn]] void refuse(const std::string& name, const std::string& value, std::string_view why) {
  throw Error(Errc::kInvalidArgument, name + "='" + value + "' " + std::string(why));
}

// A whole number from `low` to `high`, or the variable is refused with `form`.
long long checked_int(const char* name, const std::string& value, long long low, long long high,
                      std::string_view form) {
  long long number = 0;
  try {
    number = parse_int(value, name);
  } catch (const Error&) {
    refuse(name, value, "is not " + std::string(form));
  }
  if (number < low || number > high)
    refuse(name, value, "is out of range: expected " + std::string(form));
  return number;
}

// A rank and a world size given as a pair: both or neither, the rank inside the world.
void check_rank_pair(const char* rank_name, const char* size_name, const char* launcher) {
  const auto rank = get(rank_name);
  const auto size = get(size_name);
  if (rank.has_value() != size.has_value()) {
    const char* missing = rank ? size_name : rank_name;
    const char* present = rank ? rank_name : size_name;
    throw Error(Errc::kInvalidArgument, std::string(present) + " is set but " + missing +
                                            " is not: " + launcher + " sets both. Set " + missing +
                                            " too, or unset " + present +
                                            " to run as a single rank");
  }
  if (!rank) return;
  constexpr long long kMaxInt = std::numeric_limits<int>::max();
  const long long world = checked_int(size_name, *size, 1, kMaxInt, "a world size of at least 1");
  checked_int(rank_name, *rank, 0, kMaxInt, "a rank: a whole number from 0");
  if (parse_int(*rank, rank_name) >= world)
    throw Error(Errc::kInvalidArgument, std::string(rank_name) + "=" + *rank +
                                            " is out of range for " + size_name + "=" + *size +
                                            " (ranks are 0 to " + std::to_string(world - 1) + ")");
}

}  // namespace

void check_environment() {
  (void)detail::log_level();  // warns about a bad IRIS_LOG_LEVEL now, once
  constexpr long long kMaxInt = std::numeric_limits<int>::max();

  if (const auto value = get(kHeapSize)) {
    const std::size_t bytes = parse_size(*value, kHeapSize);
    if (bytes == 0) refuse(kHeapSize, *value, "is not a heap size: it must be more than 0 bytes");
  }
  if (const auto value = get(kHeapTransport);
      value && *value != "auto" && *value != "vmm" && *value != "ipc")
    refuse(kHeapTransport, *value, "is not one of auto, vmm, ipc");
  if (const auto value = get(kDebugChecks)) (void)parse_flag(*value, kDebugChecks);
  if (const auto value = get(kDevice))
    checked_int(kDevice, *value, 0, kMaxInt, "a CUDA device ordinal: a whole number from 0");
  if (const auto value = get(kWaitTimeout)) (void)parse_seconds(*value, kWaitTimeout);
  if (const auto value = get(kBootstrapTimeout)) {
    if (parse_seconds(*value, kBootstrapTimeout) == std::chrono::nanoseconds::zero())
      refuse(kBootstrapTimeout, *value,
             "is not a bootstrap timeout: it must be more than 0 seconds (the ranks need time to "
             "meet)");
  }
  if (const auto value = get(kBootstrap)) (void)detail::parse_endpoint(*value);
  if (const auto value = get(kBootstrapPort))
    checked_int(kBootstrapPort, *value, 1, 65535, "a TCP port from 1 to 65535");

  check_rank_pair(kRank, kWorldSize, "iris-run");
  if (get(kRank) && !get(kBootstrap))
    throw Error(Errc::kInvalidArgument,
                std::string(kRank) + " and " + kWorldSize + " are set but " + kBootstrap +
                    " is not: iris-run sets all three (and " + kJobSecret +
                    "). Start the ranks with iris-run, or unset " + kRank + " and " + kWorldSize);
  if (get(kBootstrap) && !get(kRank) && !get("RANK") && !get("OMPI_COMM_WORLD_RANK") &&
      !get("PMI_RANK"))
    throw Error(Errc::kInvalidArgument,
                std::string(kBootstrap) + " is set but no rank is: set " + kRank + " and " +
                    kWorldSize + ", or start the ranks with iris-run, torchrun, mpirun or srun");
  check_rank_pair(kLocalRank, kLocalWorldSize, "iris-run");
  // Under iris-run its variables decide; other launchers' are not read, so not checked.
  if (get(kBootstrap) && get(kRank)) return;
  if (const auto value = get("MASTER_PORT")) {
    if (get(kBootstrapPort) || get(kBootstrap))
      checked_int("MASTER_PORT", *value, 1, 65535, "a TCP port from 1 to 65535");
    else
      checked_int("MASTER_PORT", *value, 1, 65534,
                  "a TCP port from 1 to 65534 (the rendezvous takes MASTER_PORT + 1)");
  }
  check_rank_pair("RANK", "WORLD_SIZE", "torchrun");
  check_rank_pair("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI");
  check_rank_pair("PMI_RANK", "PMI_SIZE", "PMI (MPICH, Slurm)");
}

}  // namespace iris::env
