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

TEST(GemmConfigRule, SwapABUpTo64TokensThenSmallMWhereTheLargeTileIdlesHalfTheSms) {
  if (std::getenv("IRIS_GEMM_CONFIG") != nullptr) GTEST_SKIP() << "IRIS_GEMM_CONFIG is set";
  // M <= 64: the swap, whatever N and the SMs.
  EXPECT_EQ(Gemm::select_config(decode(1, 8192)), GemmConfig::kSwapAB);
  EXPECT_EQ(Gemm::select_config(decode(7, 8192)), GemmConfig::kSwapAB);
  EXPECT_EQ(Gemm::select_config(decode(32, 8192)), GemmConfig::kSwapAB);
  EXPECT_EQ(Gemm::select_config(decode(33, 8192)), GemmConfig::kSwapAB);
  EXPECT_EQ(Gemm::select_config(decode(64, 8192)), GemmConfig::kSwapAB);
  EXPECT_EQ(Gemm::select_config(decode(8, 256)), GemmConfig::kSwapAB);
  EXPECT_EQ(Gemm::select_config(decode(1, 8192, 16)), GemmConfig::kSwapAB);
  // Then 2 * ceil(M / 128) * ceil(N / 256) <= SMs.
  EXPECT_EQ(Gemm::select_config(decode(65, 8192)), GemmConfig::kSmallM);      // 32 tiles
  EXPECT_EQ(Gemm::select_config(decode(128, 8192)), GemmConfig::kSmallM);     // 32
  EXPECT_EQ(Gemm::select_config(decode(256, 8192)), GemmConfig::kSmallM);     // 64: 128 <= 132
  EXPECT_EQ(Gemm::select_config(decode(257, 8192)), GemmConfig::kLargeTile);  // 96
  EXPECT_EQ(Gemm::select_config(decode(4096, 4096)), GemmConfig::kLargeTile);
  EXPECT_EQ(Gemm::select_config(decode(100, 256)), GemmConfig::kSmallM);          // 1 tile
  EXPECT_EQ(Gemm::select_config(decode(100, 8192, 63)), GemmConfig::kLargeTile);  // 64 > 63
  EXPECT_EQ(Gemm::select_config(decode(100, 8192, 64)), GemmConfig::kSmallM);
  // Only bf16 -> bf16 has the decode kernels.
  for (const int m : {1, 64}) {
    auto args = decode(m, 8192);
    args.a_type = args.b_type = args.d_type = DType::kF16;
    EXPECT_EQ(Gemm::select_config(args), GemmConfig::kLargeTile);
    args = decode(m, 8192);
    args.d_type = DType::kF32;
    EXPECT_EQ(Gemm::select_config(args), GemmConfig::kLargeTile);
  }
}

TEST(GemmConfigRule, ForcedConfigurationsWin) {
  auto args = decode(1, 8192);
  args.config = GemmConfig::kLargeTile;
  EXPECT_EQ(Gemm::select_config(args), GemmConfig::kLargeTile);
  args.config = GemmConfig::kSmallM;
  EXPECT_EQ(Gemm::select_config(args), GemmConfig::kSmallM);
  for (const GemmConfig config : {GemmConfig::kSmallM, GemmConfig::kSwapAB}) {
    args = decode(8192, 8192);
    args.config = config;
    EXPECT_EQ(Gemm::select_config(args), config);
    EXPECT_TRUE(accepts(Gemm::can_implement(args)));
    args.a_type = args.b_type = args.d_type = DType::kF16;  // no fp16 decode kernels
    EXPECT_TRUE(refuses(Gemm::can_implement(args), {std::string(iris::ops::to_string(config)),
                                                    "not compiled", "fp16 -> fp16"}));
    args.a_type = args.b_type = DType::kBF16;
    args.d_type = DType::kF32;
    args.n = 4;
    EXPECT_TRUE(refuses(Gemm::can_implement(args), {"not compiled", "bf16 -> fp32"}));
  }
  EXPECT_EQ(iris::ops::to_string(GemmConfig::kSwapAB), "swap_ab");
  EXPECT_EQ(iris::ops::to_string(GemmConfig::kSmallM), "small_m");
  EXPECT_EQ(iris::ops::to_string(GemmConfig::kLargeTile), "large_tile");
  EXPECT_EQ(iris::ops::to_string(GemmConfig::kAuto), "auto");
}

// D^T is column-major N x M with leading dimension ldd: its contiguous extent is N and its
// stride ldd, the rules every configuration has; M is an outer extent of both swapped operands
// and needs no alignment. So the swap takes every shape the other configurations take, and
// refuses the same ones with the same sentences.
TEST(GemmConfigRule, SwapABTakesWhatTheOthersTake) {
  auto args = decode(1, 8192);
  args.config = GemmConfig::kSwapAB;
  for (const int m : {1, 7, 8, 31, 33, 200, 4097}) {
    args.m = m;
    EXPECT_TRUE(accepts(Gemm::can_implement(args))) << "M = " << m;
  }
  args.m = 7;
  args.n = 1544;  // ragged: 12 tiles of 128 rows and a part
  args.ldd = 1560;
  args.lda = args.ldb = 3600;
  EXPECT_TRUE(accepts(Gemm::can_implement(args)));
  args.ldd = 1550;
  EXPECT_TRUE(refuses(Gemm::can_implement(args), {"ldd = 1550", "multiple of 16 bytes"}));
  args.ldd = 0;
  args.n = 1001;
  EXPECT_TRUE(refuses(Gemm::can_implement(args), "N = 1001"));
  args.n = 1544;
  args.lda = 3590;
  EXPECT_TRUE(refuses(Gemm::can_implement(args), "lda = 3590"));
  args.lda = 0;
  args.a = fake(0x10008);
  EXPECT_TRUE(refuses(Gemm::can_implement(args), "16-byte aligned"));
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
    const ConfigEnv env("swap_ab");
    EXPECT_EQ(Gemm::select_config(decode(8192, 8192)), GemmConfig::kSwapAB);
    auto args = decode(1, 8192);
    args.config = GemmConfig::kLargeTile;
    EXPECT_EQ(Gemm::select_config(args), GemmConfig::kLargeTile);
    args = decode(1, 8192);
    args.d_type = DType::kF32;  // none compiled: the large tile
    args.n = 4;
    EXPECT_EQ(Gemm::select_config(args), GemmConfig::kLargeTile);
    EXPECT_TRUE(accepts(Gemm::can_implement(args)));
  }
  {
    const ConfigEnv env("small_m");
    EXPECT_EQ(Gemm::select_config(decode(1, 8192)), GemmConfig::kSmallM);
    EXPECT_EQ(Gemm::select_config(decode(8192, 8192)), GemmConfig::kSmallM);
    auto args = decode(1, 8192);
    args.a_type = args.b_type = args.d_type = DType::kF16;  // none compiled: the large tile
    EXPECT_EQ(Gemm::select_config(args), GemmConfig::kLargeTile);
    EXPECT_TRUE(accepts(Gemm::can_implement(args)));
  }
  {
    const ConfigEnv env("auto");
    EXPECT_EQ(Gemm::select_config(decode(8192, 8192)), GemmConfig::kLargeTile);
    EXPECT_EQ(Gemm::select_config(decode(1, 8192)), GemmConfig::kSwapAB);
  }
  {
    const ConfigEnv env("tiny");
    EXPECT_THROW(Gemm::select_config(decode(1, 8192)), iris::Error);
    EXPECT_TRUE(
        refuses(Gemm::can_implement(decode(1, 8192)), {"IRIS_GEMM_CONFIG", "tiny", "swap_ab"}));
  }
}

TEST(RowParallelPatterns, HaveTheirNames) {
  using iris::ops::AllReducePattern;
  using iris::ops::ReduceScatterPattern;
  EXPECT_EQ(iris::ops::to_string(ReduceScatterPattern::kBulkSynchronous), "bulk_synchronous");
  EXPECT_EQ(iris::ops::to_string(ReduceScatterPattern::kFusedSequential), "fused_sequential");
  EXPECT_EQ(iris::ops::to_string(ReduceScatterPattern::kProducerConsumer), "producer_consumer");
  EXPECT_EQ(iris::ops::to_string(ReduceScatterPattern::kWorkgroupSpecialized),
            "workgroup_specialized");
  EXPECT_EQ(iris::ops::to_string(AllReducePattern::kOneShot), "one_shot");
  EXPECT_EQ(iris::ops::to_string(AllReducePattern::kTwoShot), "two_shot");
  EXPECT_EQ(iris::ops::to_string(AllReducePattern::kProducerConsumer), "producer_consumer");
  EXPECT_EQ(iris::ops::to_string(AllReducePattern::kWorkgroupSpecialized), "workgroup_specialized");
}

}  // namespace
