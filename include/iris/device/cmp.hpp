// iris::cmp: the condition a wait waits for (`iris::device::wait_until(ctx, flag, iris::cmp::ge,
// 5)` returns once *flag >= 5). Plain C++: the host formats device reports with it too.
#pragma once

#include <string_view>

namespace iris {

enum class cmp : unsigned {
  eq,  ///< value == expected
  ne,  ///< value != expected
  lt,  ///< value <  expected
  le,  ///< value <= expected
  gt,  ///< value >  expected
  ge,  ///< value >= expected
};

/// "eq", "ne", "lt", "le", "gt" or "ge".
constexpr std::string_view to_string(cmp c) {
  constexpr std::string_view kNames[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  const auto i = static_cast<unsigned>(c);
  return i < 6 ? kNames[i] : std::string_view("?");
}

}  // namespace iris
