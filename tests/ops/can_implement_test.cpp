// Gemm::can_implement refuses what the kernels cannot run, with a sentence naming the problem.
// Host only: no GPU is needed (pointers are checked for alignment, never dereferenced).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>

#include "iris/host/error.hpp"
#include "iris/ops/gemm.hpp"
#include "ops/can_implement.hpp"

namespace {

using iris::ops::DType;
using iris::ops::Gemm;
using iris::ops::GemmArguments;
using ops_test::accepts;
using ops_test::fake;
using ops_test::refuses;
using testing::HasSubstr;

// Fake, 256-byte aligned addresses: never dereferenced by can_implement.
GemmArguments good() {
  GemmArguments args;
  args.m = 1000;
  args.n = 1536;
  args.k = 512;
  args.a = fake(0x10000);
  args.b = fake(0x20000);
  args.d = fake(0x30000);
  return args;
}

TEST(GemmCanImplement, AcceptsSupportedShapesAndTypes) {
  EXPECT_TRUE(accepts(Gemm::can_implement(good())));
  auto args = good();
  args.m = 1;  // any M
  EXPECT_TRUE(accepts(Gemm::can_implement(args)));
  args = good();
  args.a_type = args.b_type = DType::kF16;
  args.d_type = DType::kF16;
  EXPECT_TRUE(accepts(Gemm::can_implement(args)));
  args = good();
  args.d_type = DType::kF32;
  args.n = 4;  // 16 bytes of fp32
  EXPECT_TRUE(accepts(Gemm::can_implement(args)));
}

TEST(GemmCanImplement, RefusesRowsThatAreNotSixteenBytes) {
  auto args = good();
  args.k = 100;
  EXPECT_TRUE(refuses(Gemm::can_implement(args), {"K = 100", "multiple of 8"}));
  args = good();
  args.n = 1001;
  EXPECT_TRUE(refuses(Gemm::can_implement(args), "N = 1001"));
  args = good();
  args.lda = 513;
  EXPECT_TRUE(refuses(Gemm::can_implement(args), "lda = 513"));
  args = good();
  args.ldd = 1000;  // < N
  EXPECT_TRUE(refuses(Gemm::can_implement(args), "ldd = 1000"));
}

TEST(GemmCanImplement, RefusesEmptyOrNegativeShapes) {
  auto args = good();
  args.m = 0;
  EXPECT_TRUE(refuses(Gemm::can_implement(args), "must be positive"));
  args = good();
  args.k = -8;
  EXPECT_TRUE(refuses(Gemm::can_implement(args), "K = -8"));
}

TEST(GemmCanImplement, RefusesUncompiledTypeCombinations) {
  auto args = good();
  args.d_type = DType::kF16;  // bf16 -> fp16
  EXPECT_TRUE(refuses(Gemm::can_implement(args), "bf16 -> fp16 is not compiled"));
  args = good();
  args.b_type = DType::kF16;
  EXPECT_TRUE(refuses(Gemm::can_implement(args), "both operands must have one type"));
  args = good();
  args.a_type = args.b_type = DType::kF32;
  EXPECT_TRUE(refuses(Gemm::can_implement(args), "fp32 operands"));
}

TEST(GemmCanImplement, RefusesMisalignedOrNullPointers) {
  auto args = good();
  args.a = fake(0x10008);
  EXPECT_TRUE(refuses(Gemm::can_implement(args), "16-byte aligned"));
  args = good();
  args.d = nullptr;
  EXPECT_TRUE(refuses(Gemm::can_implement(args), "non-null"));
}

TEST(GemmCanImplement, InitializeThrowsTheSentence) {
  auto args = good();
  args.k = 100;
  Gemm gemm;
  try {
    gemm.initialize(args);
    FAIL() << "initialize accepted K = 100";
  } catch (const iris::Error& error) {
    EXPECT_EQ(error.code(), iris::Errc::kInvalidArgument);
    EXPECT_THAT(error.message(), HasSubstr("K = 100"));
  }
  EXPECT_THROW(gemm.run(), iris::Error);  // never initialized
}

}  // namespace
