// kAuto with a table file: the fused ops read the JSON table that IRIS_OPS_TUNING names (once,
// at the first kAuto of the process) and take its nearest entry for the op and world size over
// their rules, unless that entry's pattern cannot run the problem: then the rule decides (no
// compiled-in entries for these two ops). The CPU test ops.tuning covers the table itself; this
// one, the ops' use of it on a GPU. Each rank writes its own copy of the same table.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "iris/ops/all_gather_gemm.hpp"
#include "iris/ops/gemm_all_reduce.hpp"
#include "ops/common.cuh"

namespace {

using iris::ops::AllGatherPattern;
using iris::ops::AllReducePattern;
using ops_test::context;

TEST(OpsAuto, TheTableNamedByIrisOpsTuningDecides) {
  iris::Context& ctx = context();
  const int w = ctx.world_size();
  auto entry = [&](int m, int n, int k, const char* pattern) {
    return "{\"world\": " + std::to_string(w) + ", \"m\": " + std::to_string(m) +
           ", \"n\": " + std::to_string(n) + ", \"k\": " + std::to_string(k) + ", \"pattern\": \"" +
           pattern + "\"}";
  };
  // gemm_all_reduce's K is that of all ranks together; all_gather_gemm's M is.
  const std::string table =
      "{\"gemm_all_reduce\": [" + entry(128 * w, 512, 64 * w, "producer_consumer") + ", " +
      entry(4096 + w, 4096, 64 * w, "two_shot") + "], \"all_gather_gemm\": [" +
      entry(128 * w, 256, 64, "fused_mainloop") + "]}";
  const std::string path =
      testing::TempDir() + "iris_ops_tuning_rank" + std::to_string(ctx.rank()) + ".json";
  std::ofstream(path) << table;
  // Before anything in this process resolves a kAuto.
  ASSERT_EQ(setenv("IRIS_OPS_TUNING", path.c_str(), 1), 0);

  // Patterns that no rule picks: the table's.
  iris::ops::GemmAllReduceArguments ar;
  ar.m = 128 * w;
  ar.n = 512;
  ar.k = 64;
  EXPECT_EQ(iris::ops::GemmAllReduce::choose(ctx, ar), AllReducePattern::kProducerConsumer);
  iris::ops::AllGatherGemmArguments ag;
  ag.m = 128 * w;
  ag.n = 256;
  ag.k = 64;
  EXPECT_EQ(iris::ops::AllGatherGemm::choose(ctx, ag), AllGatherPattern::kFusedMainloop);

  // The nearest entry is two-shot, which cannot split 4096 + W rows into W blocks of whole
  // tiles: the rule decides (GemmAllReduce.AutoFollowsItsRule has the same case).
  ar.m = 4096 + w;
  ar.n = 4096;
  int devices = 1;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  const bool sharing = ctx.local_world_size() > devices;
  EXPECT_EQ(iris::ops::GemmAllReduce::choose(ctx, ar),
            sharing || w > 2 ? AllReducePattern::kBulkSynchronous : AllReducePattern::kOneShot);
  std::remove(path.c_str());
}

}  // namespace
