// The fused ops' kAuto table (CPU): every section of the JSON form and its refusals with a
// sentence, the nearest entry per op and world size, the order table -> compiled-in table ->
// the op's rule, the round trip through to_json(), and the benchmarks' writer replacing one op's
// entries of one world size in a file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "iris/host/error.hpp"
#include "iris/ops/detail/tuning.hpp"

namespace {

using iris::ops::AllGatherPattern;
using iris::ops::AllReducePattern;
using iris::ops::AllScatterPattern;
using iris::ops::ReduceScatterPattern;
using iris::ops::detail::OpsTuning;
using iris::ops::detail::TuningEntry;

std::string refusal(const std::string& text) {
  try {
    OpsTuning::parse(text, "t.json");
  } catch (const iris::Error& error) {
    return error.what();
  }
  return "accepted";
}

std::string read(const std::string& path) {
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  return text.str();
}

constexpr auto kAlways = [](auto) { return true; };

const char* const kEverySection = R"({
  "gemm_all_scatter": [
    {"world": 4, "m": 1024, "n": 4096, "k": 14336, "pattern": "workgroup_specialized",
     "gemm_sms": 112, "comm_blocks": 16},
    {"world": 4, "m": 16384, "n": 4096, "k": 14336, "pattern": "bulk_synchronous"}],
  "gemm_reduce_scatter": [
    {"world": 4, "m": 4096, "n": 3584, "k": 8192, "pattern": "workgroup_specialized"},
    {"world": 4, "m": 4096, "n": 12288, "k": 49152, "pattern": "producer_consumer"},
    {"world": 2, "m": 4096, "n": 3584, "k": 8192, "pattern": "bulk_synchronous"}],
  "gemm_all_reduce": [
    {"world": 8, "m": 4096, "n": 3584, "k": 8192, "pattern": "two_shot"},
    {"world": 8, "m": 16384, "n": 3584, "k": 8192, "pattern": "producer_consumer"}],
  "all_gather_gemm": [
    {"world": 4, "m": 4096, "n": 3584, "k": 8192, "pattern": "fused_mainloop"}]})";

TEST(OpsTuning, ParsesEverySection) {
  const auto table = OpsTuning::parse(kEverySection);
  ASSERT_EQ(table.entries().size(), 8u);
  // The sections' order, whatever the file's.
  EXPECT_EQ(iris::ops::detail::section_of(table.entries()[0].pattern), "gemm_all_scatter");
  EXPECT_EQ(iris::ops::detail::section_of(table.entries()[2].pattern), "gemm_reduce_scatter");
  EXPECT_EQ(iris::ops::detail::section_of(table.entries()[5].pattern), "gemm_all_reduce");
  EXPECT_EQ(iris::ops::detail::section_of(table.entries()[7].pattern), "all_gather_gemm");

  const auto scatter = table.lookup<AllScatterPattern>(4, 1024, 4096, 14336);
  EXPECT_EQ(scatter.pattern, AllScatterPattern::kWorkgroupSpecialized);
  EXPECT_EQ(scatter.gemm_sms, 112);
  EXPECT_EQ(scatter.comm_blocks, 16);
  EXPECT_EQ(table.lookup<ReduceScatterPattern>(2, 4096, 3584, 8192).pattern,
            ReduceScatterPattern::kBulkSynchronous);
  EXPECT_EQ(table.lookup<AllReducePattern>(8, 4096, 3584, 8192).pattern,
            AllReducePattern::kTwoShot);
  EXPECT_EQ(table.lookup<AllGatherPattern>(4, 4096, 3584, 8192).pattern,
            AllGatherPattern::kFusedMainloop);
}

TEST(OpsTuning, PicksTheNearestEntryOfTheOpAndWorldSize) {
  const auto table = OpsTuning::parse(kEverySection);
  EXPECT_EQ(table.lookup<AllScatterPattern>(4, 2048, 4096, 14336).pattern,
            AllScatterPattern::kWorkgroupSpecialized);
  EXPECT_EQ(table.lookup<AllScatterPattern>(4, 8192, 4096, 14336).pattern,
            AllScatterPattern::kBulkSynchronous);
  // log2 distance over (M, N, K): N and K weigh as M does.
  EXPECT_EQ(table.lookup<ReduceScatterPattern>(4, 4096, 8192, 32768).pattern,
            ReduceScatterPattern::kProducerConsumer);
  EXPECT_EQ(table.lookup<ReduceScatterPattern>(4, 4096, 4096, 8192).pattern,
            ReduceScatterPattern::kWorkgroupSpecialized);
  // Far from every entry, the world size's nearest still answers.
  EXPECT_EQ(table.lookup<ReduceScatterPattern>(2, 64, 64, 64).pattern,
            ReduceScatterPattern::kBulkSynchronous);
  EXPECT_EQ(table.lookup<AllReducePattern>(8, 65536, 3584, 8192).pattern,
            AllReducePattern::kProducerConsumer);
  // No entry of that op for the world size: no answer (another op's entries do not count).
  EXPECT_EQ(table.lookup<AllReducePattern>(4, 4096, 3584, 8192).pattern, AllReducePattern::kAuto);
  EXPECT_EQ(table.lookup<AllGatherPattern>(2, 4096, 3584, 8192).pattern, AllGatherPattern::kAuto);
  EXPECT_EQ(table.lookup<ReduceScatterPattern>(4, 0, 3584, 8192).pattern,
            ReduceScatterPattern::kAuto);
}

TEST(OpsTuning, FirstEntryWinsATie) {
  const auto table = OpsTuning::parse(R"({"gemm_all_reduce": [
      {"world": 4, "m": 2048, "n": 4096, "k": 4096, "pattern": "one_shot"},
      {"world": 4, "m": 8192, "n": 4096, "k": 4096, "pattern": "two_shot"}]})");
  EXPECT_EQ(table.lookup<AllReducePattern>(4, 4096, 4096, 4096).pattern,
            AllReducePattern::kOneShot);
}

TEST(OpsTuning, ChoosesTableThenCompiledInThenTheRule) {
  const auto table = OpsTuning::parse(kEverySection);
  // The table's entry.
  EXPECT_EQ(
      table.choose(4, 16384, 4096, 14336, AllScatterPattern::kProducerConsumer, kAlways).pattern,
      AllScatterPattern::kBulkSynchronous);
  // None for 8 ranks here: the compiled-in table's (which has 8 ranks), not the rule.
  const auto fallback = OpsTuning::defaults().lookup<AllScatterPattern>(8, 1024, 4096, 14336);
  ASSERT_NE(fallback.pattern, AllScatterPattern::kAuto);
  EXPECT_EQ(
      table.choose(8, 1024, 4096, 14336, AllScatterPattern::kProducerConsumer, kAlways).pattern,
      fallback.pattern);
  // Neither table has 3 ranks: the rule, with the default split.
  const auto rule =
      table.choose(3, 1024, 4096, 14336, AllScatterPattern::kProducerConsumer, kAlways);
  EXPECT_EQ(rule.pattern, AllScatterPattern::kProducerConsumer);
  EXPECT_EQ(rule.gemm_sms, 0);
  EXPECT_EQ(rule.comm_blocks, 0);
  // The other ops have no compiled-in entries: without the table's, the rule.
  EXPECT_EQ(
      table.choose(8, 4096, 3584, 8192, ReduceScatterPattern::kFusedSequential, kAlways).pattern,
      ReduceScatterPattern::kFusedSequential);
  EXPECT_EQ(table.choose(4, 4096, 3584, 8192, AllReducePattern::kOneShot, kAlways).pattern,
            AllReducePattern::kOneShot);
  EXPECT_EQ(table.choose(4, 4096, 3584, 8192, AllGatherPattern::kBulkSynchronous, kAlways).pattern,
            AllGatherPattern::kFusedMainloop);
  // A pattern the op cannot run on the problem is no answer: the next source decides.
  const auto no_two_shot = [](AllReducePattern p) { return p != AllReducePattern::kTwoShot; };
  EXPECT_EQ(
      table.choose(8, 4096, 3584, 8192, AllReducePattern::kBulkSynchronous, no_two_shot).pattern,
      AllReducePattern::kBulkSynchronous);
  const auto no_bulk = [](AllScatterPattern p) { return p != AllScatterPattern::kBulkSynchronous; };
  EXPECT_EQ(
      table.choose(4, 16384, 4096, 14336, AllScatterPattern::kProducerConsumer, no_bulk).pattern,
      OpsTuning::defaults().lookup<AllScatterPattern>(4, 16384, 4096, 14336).pattern);
}

TEST(OpsTuning, CompiledInTableHoldsAllScatterOnly) {
  for (int world : {2, 4, 8})
    for (int m : {1, 1024, 16384})
      EXPECT_NE(OpsTuning::defaults().lookup<AllScatterPattern>(world, m, 4096, 14336).pattern,
                AllScatterPattern::kAuto);
  EXPECT_EQ(OpsTuning::defaults().lookup<ReduceScatterPattern>(4, 4096, 3584, 8192).pattern,
            ReduceScatterPattern::kAuto);
  EXPECT_EQ(OpsTuning::defaults().lookup<AllReducePattern>(4, 4096, 3584, 8192).pattern,
            AllReducePattern::kAuto);
  EXPECT_EQ(OpsTuning::defaults().lookup<AllGatherPattern>(4, 4096, 3584, 8192).pattern,
            AllGatherPattern::kAuto);
}

TEST(OpsTuning, KeepsTheAllScatterFileForm) {
  // What bench_gemm_all_scatter --tune wrote before the other sections existed.
  const auto table = OpsTuning::parse(R"({"gemm_all_scatter": [
      {"world": 8, "m": 4096, "n": 49152, "k": 12288, "pattern": "fused_sequential",
       "gemm_sms": 0, "comm_blocks": 4}]})");
  ASSERT_EQ(table.entries().size(), 1u);
  EXPECT_EQ(table.lookup<AllScatterPattern>(8, 4096, 49152, 12288).comm_blocks, 4);
  EXPECT_TRUE(OpsTuning::parse("{}").entries().empty());
}

TEST(OpsTuning, RoundTripsThroughJson) {
  const auto table = OpsTuning::parse(kEverySection);
  const auto again = OpsTuning::parse(table.to_json());
  ASSERT_EQ(again.entries().size(), table.entries().size());
  for (std::size_t i = 0; i < table.entries().size(); ++i) {
    const TuningEntry &a = table.entries()[i], &b = again.entries()[i];
    EXPECT_EQ(a.world, b.world);
    EXPECT_EQ(a.m, b.m);
    EXPECT_EQ(a.n, b.n);
    EXPECT_EQ(a.k, b.k);
    EXPECT_EQ(a.pattern, b.pattern);
    EXPECT_EQ(a.gemm_sms, b.gemm_sms);
    EXPECT_EQ(a.comm_blocks, b.comm_blocks);
  }
  // Only the all-scatter's entries carry a split.
  EXPECT_THAT(OpsTuning::parse(R"({"gemm_all_reduce": [{"world": 2, "m": 8, "n": 8, "k": 8,
      "pattern": "one_shot"}]})")
                  .to_json(),
              testing::Not(testing::HasSubstr("comm_blocks")));
  EXPECT_EQ(OpsTuning().to_json(), "{}\n");
}

TEST(OpsTuning, RefusesMalformedTablesWithASentence) {
  EXPECT_THAT(refusal("[]"), testing::HasSubstr("must be a JSON object"));
  EXPECT_THAT(refusal(R"({"gemm_all_gather": []})"),
              testing::AllOf(testing::HasSubstr("t.json"),
                             testing::HasSubstr("unknown section \"gemm_all_gather\" (one of "
                                                "gemm_all_scatter, gemm_reduce_scatter, "
                                                "gemm_all_reduce, all_gather_gemm)")));
  EXPECT_THAT(refusal(R"({"gemm_all_reduce": {}})"),
              testing::HasSubstr("\"gemm_all_reduce\": the section must be an array"));
  EXPECT_THAT(refusal(R"({"all_gather_gemm": [3]})"),
              testing::HasSubstr("\"all_gather_gemm\": each entry must be an object"));
  EXPECT_THAT(refusal(R"({"gemm_all_scatter": [{"world": 2, "m": 1, "n": 8, "k": 8}]})"),
              testing::HasSubstr("\"gemm_all_scatter\": entry without \"pattern\""));
  EXPECT_THAT(refusal(R"({"gemm_reduce_scatter": [{"world": 2, "pattern": "fused_sequential"}]})"),
              testing::HasSubstr("\"gemm_reduce_scatter\": entry without all of"));
  // Patterns are parsed against the section's own op.
  EXPECT_THAT(refusal(R"({"gemm_all_scatter": [{"world": 2, "m": 1, "n": 8, "k": 8,
                         "pattern": "auto"}]})"),
              testing::HasSubstr("unknown GEMM + all-scatter pattern \"auto\""));
  EXPECT_THAT(refusal(R"({"gemm_reduce_scatter": [{"world": 2, "m": 8, "n": 8, "k": 8,
                         "pattern": "one_shot"}]})"),
              testing::HasSubstr("\"gemm_reduce_scatter\": unknown GEMM + reduce-scatter pattern "
                                 "\"one_shot\" (one of bulk_synchronous, fused_sequential, "
                                 "producer_consumer, workgroup_specialized)"));
  EXPECT_THAT(refusal(R"({"gemm_all_reduce": [{"world": 2, "m": 8, "n": 8, "k": 8,
                         "pattern": "fused_sequential"}]})"),
              testing::HasSubstr("unknown GEMM + all-reduce pattern \"fused_sequential\""));
  EXPECT_THAT(refusal(R"({"all_gather_gemm": [{"world": 2, "m": 8, "n": 8, "k": 8,
                         "pattern": "workgroup_specialized"}]})"),
              testing::HasSubstr("unknown all-gather + GEMM pattern \"workgroup_specialized\""));
  // Fields of the wrong type, or that the op does not take.
  EXPECT_THAT(refusal(R"({"gemm_all_reduce": [{"world": 2, "m": "4096", "n": 8, "k": 8,
                         "pattern": "one_shot"}]})"),
              testing::HasSubstr("\"gemm_all_reduce\": \"m\" must be a number"));
  EXPECT_THAT(refusal(R"({"all_gather_gemm": [{"world": 2, "m": 8, "n": 8, "k": 8,
                         "pattern": 1}]})"),
              testing::HasSubstr("\"all_gather_gemm\": \"pattern\" must be a string"));
  EXPECT_THAT(refusal(R"({"gemm_all_scatter": [{"world": 2.5, "m": 8, "n": 8, "k": 8,
                         "pattern": "fused_sequential"}]})"),
              testing::HasSubstr("\"world\" must be a whole number >= 0"));
  EXPECT_THAT(refusal(R"({"gemm_all_scatter": [{"world": 0, "m": 1, "n": 8, "k": 8,
                         "pattern": "fused_sequential"}]})"),
              testing::HasSubstr("\"world\" must be a positive int"));
  EXPECT_THAT(refusal(R"({"gemm_all_scatter": [{"world": 2, "m": 1, "n": 8, "k": 8,
                         "pattern": "fused_sequential", "comm_blocks": 5000}]})"),
              testing::HasSubstr("\"comm_blocks\" must be at most 4096"));
  EXPECT_THAT(refusal(R"({"gemm_all_scatter": [{"world": 2, "m": 1, "n": 8, "k": 8,
                         "pattern": "workgroup_specialized", "gemm_sms": 1}]})"),
              testing::HasSubstr("\"gemm_sms\" 1 cannot hold the GEMM's 2-CTA clusters"));
  EXPECT_THAT(refusal(R"({"gemm_reduce_scatter": [{"world": 2, "m": 8, "n": 8, "k": 8,
                         "pattern": "fused_sequential", "comm_blocks": 4}]})"),
              testing::HasSubstr("\"gemm_reduce_scatter\": \"comm_blocks\" is not a field of "
                                 "this op's entries"));
  EXPECT_THAT(refusal(R"({"gemm_all_scatter": [{"world": 2, "m": 1, "n": 8, "k": 8,
                         "pattern": "fused_sequential", "sms": 3}]})"),
              testing::HasSubstr("\"gemm_all_scatter\": unknown key \"sms\""));
  EXPECT_THAT(refusal(R"({"gemm_all_scatter": [)"), testing::HasSubstr("t.json"));
  EXPECT_THROW(OpsTuning::from_file("/nonexistent/iris_ops_tuning.json"), iris::Error);
}

TEST(OpsTuning, WithMeasuredReplacesOneOpsEntriesOfOneWorldSize) {
  const auto table = OpsTuning::parse(kEverySection);
  const auto replaced =
      table.with_measured(ReduceScatterPattern::kAuto, 4,
                          {{4, 4096, 3584, 8192, ReduceScatterPattern::kFusedSequential}});
  ASSERT_EQ(replaced.entries().size(), 7u);  // 8 - 2 reduce-scatter entries for 4 ranks + 1
  EXPECT_EQ(replaced.lookup<ReduceScatterPattern>(4, 4096, 12288, 49152).pattern,
            ReduceScatterPattern::kFusedSequential);
  // The op's entries of other world sizes and the other ops' are kept.
  EXPECT_EQ(replaced.lookup<ReduceScatterPattern>(2, 4096, 3584, 8192).pattern,
            ReduceScatterPattern::kBulkSynchronous);
  EXPECT_EQ(replaced.lookup<AllReducePattern>(8, 4096, 3584, 8192).pattern,
            AllReducePattern::kTwoShot);
  EXPECT_EQ(replaced.lookup<AllScatterPattern>(4, 1024, 4096, 14336).comm_blocks, 16);
  // Nothing measured: the op's entries for that world size go.
  EXPECT_EQ(table.with_measured(AllGatherPattern::kAuto, 4, {}).entries().size(), 7u);
  EXPECT_THROW(table.with_measured(ReduceScatterPattern::kAuto, 4,
                                   {{4, 8, 8, 8, AllReducePattern::kOneShot}}),
               iris::Error);
  EXPECT_THROW(table.with_measured(ReduceScatterPattern::kAuto, 4,
                                   {{2, 8, 8, 8, ReduceScatterPattern::kFusedSequential}}),
               iris::Error);
  EXPECT_THROW(table.with_measured(ReduceScatterPattern::kAuto, 4,
                                   {{4, 8, 8, 8, ReduceScatterPattern::kAuto}}),
               iris::Error);
}

TEST(OpsTuning, WriterReplacesOnlyItsOpsEntriesOfItsWorldSize) {
  using iris::ops::detail::write_tuning_entries;
  const std::string path = testing::TempDir() + "iris_ops_tuning_writer_test.json";
  std::remove(path.c_str());
  // No file yet: these entries alone.
  write_tuning_entries(path, AllScatterPattern::kAuto, 4,
                       {{4, 1024, 4096, 14336, AllScatterPattern::kWorkgroupSpecialized, 0, 8}});
  write_tuning_entries(path, AllGatherPattern::kAuto, 4,
                       {{4, 4096, 3584, 8192, AllGatherPattern::kProducerConsumer}});
  write_tuning_entries(path, AllGatherPattern::kAuto, 2,
                       {{2, 4096, 3584, 8192, AllGatherPattern::kProducerConsumer}});
  // Writing an op's world size again replaces its entries, and leaves the rest.
  write_tuning_entries(path, AllGatherPattern::kAuto, 4,
                       {{4, 4096, 3584, 8192, AllGatherPattern::kBulkSynchronous},
                        {4, 16384, 3584, 8192, AllGatherPattern::kFusedMainloop}});
  const auto table = OpsTuning::from_file(path);
  ASSERT_EQ(table.entries().size(), 4u);
  EXPECT_EQ(table.lookup<AllScatterPattern>(4, 1024, 4096, 14336).comm_blocks, 8);
  EXPECT_EQ(table.lookup<AllGatherPattern>(4, 4096, 3584, 8192).pattern,
            AllGatherPattern::kBulkSynchronous);
  EXPECT_EQ(table.lookup<AllGatherPattern>(4, 16384, 3584, 8192).pattern,
            AllGatherPattern::kFusedMainloop);
  EXPECT_EQ(table.lookup<AllGatherPattern>(2, 4096, 3584, 8192).pattern,
            AllGatherPattern::kProducerConsumer);
  // A malformed file is refused, and left as it was.
  const std::string malformed = R"({"gemm_all_scatter": [})";
  std::ofstream(path) << malformed;
  EXPECT_THROW(write_tuning_entries(path, AllGatherPattern::kAuto, 4, {}), iris::Error);
  EXPECT_EQ(read(path), malformed);
  std::remove(path.c_str());
}

// The only test of this binary that asks for current(), which reads the variable once.
TEST(OpsTuning, CurrentReadsTheFileNamedByTheVariable) {
  const std::string path = testing::TempDir() + "iris_ops_tuning_test.json";
  std::ofstream(path) << R"({"gemm_all_scatter": [{"world": 2, "m": 64, "n": 64, "k": 64,
      "pattern": "producer_consumer", "comm_blocks": 6}],
      "gemm_reduce_scatter": [{"world": 2, "m": 64, "n": 64, "k": 64,
      "pattern": "workgroup_specialized"}]})";
  ASSERT_EQ(setenv(iris::ops::detail::kOpsTuningEnv, path.c_str(), 1), 0);
  const auto& table = OpsTuning::current();
  ASSERT_EQ(table.entries().size(), 2u);
  const auto c = table.choose(2, 4096, 4096, 4096, AllScatterPattern::kFusedSequential, kAlways);
  EXPECT_EQ(c.pattern, AllScatterPattern::kProducerConsumer);
  EXPECT_EQ(c.comm_blocks, 6);
  EXPECT_EQ(
      table.choose(2, 4096, 4096, 4096, ReduceScatterPattern::kFusedSequential, kAlways).pattern,
      ReduceScatterPattern::kWorkgroupSpecialized);
  unsetenv(iris::ops::detail::kOpsTuningEnv);
  std::remove(path.c_str());
}

}  // namespace
