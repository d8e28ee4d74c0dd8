// iris::Error: codes, the text of what(), CUDA statuses and errno.
#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <string>

#include "iris/host/error.hpp"

namespace {

using iris::Errc;
using iris::Error;
using testing::HasSubstr;
using testing::StartsWith;

TEST(Error, EveryCodeHasAName) {
  for (int code = static_cast<int>(Errc::kInvalidArgument);
       code <= static_cast<int>(Errc::kInternal); ++code) {
    const auto name = iris::to_string(static_cast<Errc>(code));
    EXPECT_FALSE(name.empty());
    EXPECT_NE(name, "unknown") << code;
  }
  EXPECT_EQ(iris::to_string(Errc::kTimeout), "timeout");
  EXPECT_EQ(iris::to_string(Errc::kBootstrap), "bootstrap");
}

TEST(Error, WhatNamesTheCodeTheMessageAndTheCallSite) {
  const Error error(Errc::kTimeout, "ranks 2, 3 did not arrive within 5 s");
  const int line = __LINE__ - 1;
  EXPECT_EQ(error.code(), Errc::kTimeout);
  EXPECT_EQ(error.cuda_status(), 0);
  EXPECT_EQ(error.message(), "ranks 2, 3 did not arrive within 5 s");
  EXPECT_EQ(std::string(error.what()),
            "iris: timeout: ranks 2, 3 did not arrive within 5 s (at error_test.cpp:" +
                std::to_string(line) + ")");
  EXPECT_EQ(error.where().line(), static_cast<unsigned>(line));
  const std::runtime_error& as_standard = error;  // catchable as a standard exception
  EXPECT_THAT(as_standard.what(), StartsWith("iris: timeout:"));
}

TEST(Error, CudaStatusIsNamed) {
  const Error error(Errc::kCuda, "cudaMalloc failed", static_cast<int>(cudaErrorMemoryAllocation));
  EXPECT_EQ(error.cuda_status(), static_cast<int>(cudaErrorMemoryAllocation));
  EXPECT_THAT(error.what(), HasSubstr("[cuda: cudaErrorMemoryAllocation (2)]"));
}

TEST(Error, CudaCheckThrowsWithTheExpression) {
  try {
    IRIS_CUDA_CHECK(cudaErrorInvalidValue);
    ADD_FAILURE() << "IRIS_CUDA_CHECK did not throw";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), Errc::kCuda);
    EXPECT_EQ(error.cuda_status(), static_cast<int>(cudaErrorInvalidValue));
    EXPECT_THAT(error.message(), HasSubstr("cudaErrorInvalidValue failed"));
    EXPECT_THAT(error.what(), HasSubstr("error_test.cpp"));
  }
  IRIS_CUDA_CHECK(cudaSuccess);  // success does not throw
}

TEST(Error, SystemErrorCarriesErrnoText) {
  try {
    iris::detail::throw_system_error(ENOENT, "open(/nowhere)");
    ADD_FAILURE() << "throw_system_error returned";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), Errc::kSystem);
    EXPECT_EQ(error.message(), "open(/nowhere): No such file or directory");
    EXPECT_THAT(error.what(), HasSubstr("error_test.cpp"));
  }
}

}  // namespace
