// GemmAllScatter's kAuto table (CPU): the JSON form, its refusals with a sentence, the nearest
// entry per world size, the fall-back to the compiled-in table, and the round trip through
// to_json().
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "iris/host/error.hpp"
#include "iris/ops/detail/all_scatter_tuning.hpp"

namespace {

using iris::ops::AllScatterPattern;
using iris::ops::detail::AllScatterTuning;

std::string refusal(const std::string& text) {
  try {
    AllScatterTuning::parse(text, "t.json");
  } catch (const iris::Error& error) {
    return error.what();
  }
  return "accepted";
}

TEST(AllScatterTuning, PicksTheNearestEntryOfTheWorldSize) {
  const auto table = AllScatterTuning::parse(R"({"gemm_all_scatter": [
      {"world": 4, "m": 1024, "n": 4096, "k": 14336, "pattern": "workgroup_specialized",
       "gemm_sms": 112, "comm_blocks": 16},
      {"world": 4, "m": 16384, "n": 4096, "k": 14336, "pattern": "bulk_synchronous"},
      {"world": 2, "m": 1024, "n": 4096, "k": 14336, "pattern": "producer_consumer"}]})");
  ASSERT_EQ(table.entries().size(), 3u);
  auto c = table.choose(4, 1024, 4096, 14336);
  EXPECT_EQ(c.pattern, AllScatterPattern::kWorkgroupSpecialized);
  EXPECT_EQ(c.gemm_sms, 112);
  EXPECT_EQ(c.comm_blocks, 16);
  EXPECT_EQ(table.choose(4, 2048, 4096, 14336).pattern, AllScatterPattern::kWorkgroupSpecialized);
  EXPECT_EQ(table.choose(4, 8192, 4096, 14336).pattern, AllScatterPattern::kBulkSynchronous);
  EXPECT_EQ(table.choose(2, 65536, 512, 64).pattern, AllScatterPattern::kProducerConsumer);
  // No entry for 8 ranks here: the compiled-in table's choice; none for 3 there either.
  EXPECT_EQ(table.choose(8, 1024, 4096, 14336).pattern,
            AllScatterTuning::defaults().choose(8, 1024, 4096, 14336).pattern);
  EXPECT_EQ(table.choose(3, 1024, 4096, 14336).pattern, AllScatterPattern::kFusedSequential);
  EXPECT_EQ(table.lookup(3, 1024, 4096, 14336).pattern, AllScatterPattern::kAuto);
}

TEST(AllScatterTuning, DefaultsNeverSayAuto) {
  for (int world : {1, 2, 4, 8, 16})
    for (int m : {1, 1024, 16384})
      EXPECT_NE(AllScatterTuning::defaults().choose(world, m, 4096, 14336).pattern,
                AllScatterPattern::kAuto);
}

TEST(AllScatterTuning, RoundTripsThroughJson) {
  const auto table = AllScatterTuning::parse(
      R"({"gemm_all_scatter": [{"world": 8, "m": 4096, "n": 49152, "k": 12288,
          "pattern": "fused_sequential", "comm_blocks": 4}]})");
  const auto again = AllScatterTuning::parse(table.to_json());
  ASSERT_EQ(again.entries().size(), 1u);
  const auto& e = again.entries()[0];
  EXPECT_EQ(e.world, 8);
  EXPECT_EQ(e.m, 4096);
  EXPECT_EQ(e.n, 49152);
  EXPECT_EQ(e.k, 12288);
  EXPECT_EQ(e.choice.pattern, AllScatterPattern::kFusedSequential);
  EXPECT_EQ(e.choice.gemm_sms, 0);
  EXPECT_EQ(e.choice.comm_blocks, 4);
}

TEST(AllScatterTuning, RefusesMalformedTablesWithASentence) {
  EXPECT_THAT(refusal("[]"), testing::HasSubstr("must be a JSON object"));
  EXPECT_THAT(refusal("{}"), testing::HasSubstr("missing \"gemm_all_scatter\""));
  EXPECT_THAT(refusal(R"({"gemm_all_scatter": [{"world": 2, "m": 1, "n": 8, "k": 8}]})"),
              testing::HasSubstr("without \"pattern\""));
  EXPECT_THAT(refusal(R"({"gemm_all_scatter": [{"world": 2, "pattern": "fused_sequential"}]})"),
              testing::HasSubstr("without all of"));
  EXPECT_THAT(refusal(R"({"gemm_all_scatter": [{"world": 2, "m": 1, "n": 8, "k": 8,
                         "pattern": "auto"}]})"),
              testing::HasSubstr("unknown GEMM + all-scatter pattern \"auto\""));
  EXPECT_THAT(refusal(R"({"gemm_all_scatter": [{"world": 0, "m": 1, "n": 8, "k": 8,
                         "pattern": "fused_sequential"}]})"),
              testing::HasSubstr("\"world\" must be a positive int"));
  EXPECT_THAT(refusal(R"({"gemm_all_scatter": [{"world": 2, "m": 1, "n": 8, "k": 8,
                         "pattern": "fused_sequential", "sms": 3}]})"),
              testing::HasSubstr("unknown key \"sms\""));
  EXPECT_THAT(refusal(R"({"gemm_all_scatter": [)"), testing::HasSubstr("t.json"));
  EXPECT_THROW(AllScatterTuning::from_file("/nonexistent/iris_ops_tuning.json"), iris::Error);
}

// The only test of this binary that asks for current(), which reads the variable once.
TEST(AllScatterTuning, CurrentReadsTheFileNamedByTheVariable) {
  const std::string path = testing::TempDir() + "iris_ops_tuning_test.json";
  std::ofstream(path) << R"({"gemm_all_scatter": [{"world": 2, "m": 64, "n": 64, "k": 64,
      "pattern": "producer_consumer", "comm_blocks": 6}]})";
  ASSERT_EQ(setenv(iris::ops::detail::kAllScatterTuningEnv, path.c_str(), 1), 0);
  const auto& table = AllScatterTuning::current();
  ASSERT_EQ(table.entries().size(), 1u);
  const auto c = table.choose(2, 4096, 4096, 4096);
  EXPECT_EQ(c.pattern, AllScatterPattern::kProducerConsumer);
  EXPECT_EQ(c.comm_blocks, 6);
  unsetenv(iris::ops::detail::kAllScatterTuningEnv);
}

}  // namespace
