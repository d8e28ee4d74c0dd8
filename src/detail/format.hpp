// Small text helpers for messages that people read (errors, logs).
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

namespace iris::detail {

/// A byte count as a person reads it: "0 B", "1023 B", "1.5 KiB", "768 MiB", "3.0 GiB".
/// Units are powers of 1024. Values below 10 of their unit keep one decimal and larger ones are
/// whole numbers, so the text stays short. It is rounded: see format_byte_count for exact text.
inline std::string format_bytes(std::size_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  static constexpr std::size_t kUnitCount = sizeof(kUnits) / sizeof(kUnits[0]);
  if (bytes < 1024) return std::to_string(bytes) + " B";

  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < kUnitCount) {
    value /= 1024.0;
    ++unit;
  }
  // Rounding can carry into the next unit (1023.7 KiB prints as 1024): step up once more then.
  if (value >= 1023.5 && unit + 1 < kUnitCount) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  if (value < 9.95)
    std::snprintf(text, sizeof(text), "%.1f %s", value, kUnits[unit]);
  else
    std::snprintf(text, sizeof(text), "%.0f %s", value, kUnits[unit]);
  return text;
}

/// A byte count exactly, with the readable form beside it from 1 MiB on, where long numbers
/// stop being easy to read: "4097 B", "3221225472 B = 3.0 GiB". For messages where one byte
/// matters (a request, a mismatch).
inline std::string format_byte_count(std::size_t bytes) {
  std::string text = std::to_string(bytes) + " B";
  if (bytes >= (std::size_t{1} << 20)) text += " = " + format_bytes(bytes);
  return text;
}

}  // namespace iris::detail
