// Shared by the iris::ops tests of can_implement (host only, no CUDA needed): fake tensor
// addresses, and the checks that a Status accepts, or refuses with a sentence naming the problem.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <string>

#include "iris/ops/gemm.hpp"

namespace ops_test {

/// A fake device address: can_implement checks pointers (null, alignment, overlaps) and never
/// dereferences them.
inline void* fake(std::uintptr_t address) {
  return reinterpret_cast<void*>(address);
}

/// `status` accepts (else the sentence it refused with is printed).
inline testing::AssertionResult accepts(const iris::ops::Status& status) {
  if (status) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "refused with \"" << status.message << "\"";
}

/// `status` refuses, with a sentence that contains every one of `parts`.
inline testing::AssertionResult refuses(const iris::ops::Status& status,
                                        std::initializer_list<std::string> parts) {
  if (status) return testing::AssertionFailure() << "accepted";
  for (const auto& part : parts)
    if (status.message.find(part) == std::string::npos)
      return testing::AssertionFailure() << "refused with \"" << status.message
                                         << "\", which does not contain \"" << part << "\"";
  return testing::AssertionSuccess() << "refused with \"" << status.message << "\"";
}
inline testing::AssertionResult refuses(const iris::ops::Status& status, const char* part) {
  return refuses(status, {std::string(part)});
}

}  // namespace ops_test
