// Gemm::can_implement refuses what the kernels cannot run, with a sentence naming the problem;
// the row-parallel ops' patterns have the names the benchmarks and examples print.
// Host only: no GPU is needed (pointers are checked for alignment, never dereferenced).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "iris/host/error.hpp"
#include "iris/ops/gemm.hpp"
#include "iris/ops/gemm_all_reduce.hpp"
#include "iris/ops/gemm_reduce_scatter.hpp"
#include "ops/can_implement.hpp"

namespace {

using iris::ops::DType;
using iris::ops::Gemm;
using iris::ops::GemmArguments;
using iris::ops::GemmConfig;
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

// The configuration rule (select_config): with sm_count given it needs no GPU.
GemmArguments decode(int m, int n, int sms = 132) {
  auto args = good();
  args.m = m;
  args.n = n;
  args.k = 3584;
  args.sm_count = sms;
  return args;
}

/// Sets IRIS_GEMM_CONFIG for one scope, restoring what was there.
class ConfigEnv {
 public:
  explicit ConfigEnv(const char* value) {
    if (const char* old = std::getenv("IRIS_GEMM_CONFIG")) old_ = old;
    setenv("IRIS_GEMM_CONFIG", value, 1);
  }
  ~ConfigEnv() {
    if (old_)
      setenv("IRIS_GEMM_CONFIG", old_->c_str(), 1);
    else
      unsetenv("IRIS_GEMM_CONFIG");
  }
  ConfigEnv(const ConfigEnv&) = delete;
  ConfigEnv& operator=(const ConfigEnv&) = delete;

 private:
  std::optional<std::string> old_;
};

TEST(GemmConfigRule, SmallMWhereTheLargeTileIdlesHalfTheSms) {
  if (std::getenv("IRIS_GEMM_CONFIG") != nullptr) GTEST_SKIP() << "IRIS_GEMM_CONFIG is set";
  // 2 * ceil(M / 128) * ceil(N / 256) <= SMs.
  EXPECT_EQ(Gemm::select_config(decode(1, 8192)), GemmConfig::kSmallM);       // 32 tiles
  EXPECT_EQ(Gemm::select_config(decode(128, 8192)), GemmConfig::kSmallM);     // 32
  EXPECT_EQ(Gemm::select_config(decode(256, 8192)), GemmConfig::kSmallM);     // 64: 128 <= 132
  EXPECT_EQ(Gemm::select_config(decode(257, 8192)), GemmConfig::kLargeTile);  // 96
  EXPECT_EQ(Gemm::select_config(decode(4096, 4096)), GemmConfig::kLargeTile);
  EXPECT_EQ(Gemm::select_config(decode(8, 256)), GemmConfig::kSmallM);          // 1 tile
  EXPECT_EQ(Gemm::select_config(decode(1, 8192, 63)), GemmConfig::kLargeTile);  // 64 > 63
  EXPECT_EQ(Gemm::select_config(decode(1, 8192, 64)), GemmConfig::kSmallM);
  // Only bf16 -> bf16 has a small-M kernel.
  auto args = decode(1, 8192);
  args.a_type = args.b_type = args.d_type = DType::kF16;
  EXPECT_EQ(Gemm::select_config(args), GemmConfig::kLargeTile);
  args = decode(1, 8192);
  args.d_type = DType::kF32;
  EXPECT_EQ(Gemm::select_config(args), GemmConfig::kLargeTile);
}

TEST(GemmConfigRule, ForcedConfigurationsWin) {
  auto args = decode(1, 8192);
  args.config = GemmConfig::kLargeTile;
  EXPECT_EQ(Gemm::select_config(args), GemmConfig::kLargeTile);
  args = decode(8192, 8192);
  args.config = GemmConfig::kSmallM;
  EXPECT_EQ(Gemm::select_config(args), GemmConfig::kSmallM);
  EXPECT_TRUE(accepts(Gemm::can_implement(args)));
  args.a_type = args.b_type = args.d_type = DType::kF16;  // no fp16 small-M kernel
  EXPECT_TRUE(refuses(Gemm::can_implement(args), {"small_m", "not compiled", "fp16 -> fp16"}));
  EXPECT_EQ(iris::ops::to_string(GemmConfig::kSmallM), "small_m");
  EXPECT_EQ(iris::ops::to_string(GemmConfig::kLargeTile), "large_tile");
  EXPECT_EQ(iris::ops::to_string(GemmConfig::kAuto), "auto");
}

TEST(GemmConfigRule, TheEnvironmentForcesAutoArguments) {
  {
    const ConfigEnv env("large_tile");
    EXPECT_EQ(Gemm::select_config(decode(1, 8192)), GemmConfig::kLargeTile);
    auto args = decode(1, 8192);
    args.config = GemmConfig::kSmallM;  // the arguments win over the environment
    EXPECT_EQ(Gemm::select_config(args), GemmConfig::kSmallM);
  }
  {
    const ConfigEnv env("small_m");
    EXPECT_EQ(Gemm::select_config(decode(8192, 8192)), GemmConfig::kSmallM);
    auto args = decode(1, 8192);
    args.a_type = args.b_type = args.d_type = DType::kF16;  // none compiled: the large tile
    EXPECT_EQ(Gemm::select_config(args), GemmConfig::kLargeTile);
    EXPECT_TRUE(accepts(Gemm::can_implement(args)));
  }
  {
    const ConfigEnv env("auto");
    EXPECT_EQ(Gemm::select_config(decode(8192, 8192)), GemmConfig::kLargeTile);
  }
  {
    const ConfigEnv env("tiny");
    EXPECT_THROW(Gemm::select_config(decode(1, 8192)), iris::Error);
    EXPECT_TRUE(refuses(Gemm::can_implement(decode(1, 8192)), {"IRIS_GEMM_CONFIG", "tiny"}));
  }
}

TEST(RowParallelPatterns, HaveTheirNames) {
  using iris::ops::AllReducePattern;
  using iris::ops::ReduceScatterPattern;
  EXPECT_EQ(iris::ops::to_string(ReduceScatterPattern::kBulkSynchronous), "bulk_synchronous");
  EXPECT_EQ(iris::ops::to_string(ReduceScatterPattern::kFusedSequential), "fused_sequential");
  EXPECT_EQ(iris::ops::to_string(ReduceScatterPattern::kProducerConsumer), "producer_consumer");
  EXPECT_EQ(iris::ops::to_string(AllReducePattern::kOneShot), "one_shot");
  EXPECT_EQ(iris::ops::to_string(AllReducePattern::kTwoShot), "two_shot");
  EXPECT_EQ(iris::ops::to_string(AllReducePattern::kProducerConsumer), "producer_consumer");
}

}  // namespace
