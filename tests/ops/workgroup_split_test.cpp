// The block split of the workgroup-specialized launches (CPU): GemmAllScatter's send blocks and
// the pull reducer's blocks of GemmReduceScatter and GemmAllReduce, in whole clusters, within
// this rank's budget where the side blocks wait for other ranks' GEMMs.
#include <gtest/gtest.h>

#include "iris/ops/detail/comm_op.hpp"

namespace {

using iris::ops::detail::resident_workgroup_split;
using iris::ops::detail::workgroup_split;

constexpr int kSms = 132, kCluster = 2;

TEST(WorkgroupSplit, DefaultsToSixteenSmsOfAWholeGpu) {
  // One rank per GPU, one block per SM: 16 side blocks, the GEMM the rest of the budget.
  auto split = workgroup_split(132, kCluster, kSms, 0, 0);
  EXPECT_EQ(split.side_blocks, 16);
  EXPECT_EQ(split.gemm_blocks, 116);
  // Four ranks sharing the GPU: 32 blocks each, 16 * 32 / 132 = 3 side blocks rounded up to 4.
  split = workgroup_split(32, kCluster, kSms, 0, 0);
  EXPECT_EQ(split.side_blocks, 4);
  EXPECT_EQ(split.gemm_blocks, 28);
  // The smallest budget, two clusters: one each.
  split = workgroup_split(4, kCluster, kSms, 0, 0);
  EXPECT_EQ(split.side_blocks, 2);
  EXPECT_EQ(split.gemm_blocks, 2);
}

TEST(WorkgroupSplit, RoundsAskedCountsToClusters) {
  auto split = workgroup_split(132, kCluster, kSms, 0, 1);  // one side block: one cluster
  EXPECT_EQ(split.side_blocks, 2);
  EXPECT_EQ(split.gemm_blocks, 130);
  split = workgroup_split(132, kCluster, kSms, 9, 5);  // GEMM rounded down, side up
  EXPECT_EQ(split.gemm_blocks, 8);
  EXPECT_EQ(split.side_blocks, 6);
  split = workgroup_split(132, kCluster, kSms, 1, 0);  // never below one cluster
  EXPECT_EQ(split.gemm_blocks, 2);
}

TEST(WorkgroupSplit, MayPassTheBudgetWhereAsked) {
  // The send loop waits only for its own launch's GEMM blocks: asked counts are kept.
  const auto split = workgroup_split(32, kCluster, kSms, 0, 100);
  EXPECT_EQ(split.side_blocks, 100);
  EXPECT_EQ(split.gemm_blocks, 2);
}

TEST(WorkgroupSplit, ResidentSplitStaysWithinTheBudget) {
  // The pull reducer waits for the members' GEMMs: the grid never passes the budget, and the
  // GEMM keeps at least one cluster.
  for (const int budget : {4, 16, 32, 66, 132})
    for (const int asked : {0, 1, 2, 7, 16, 64, 131, 132, 100000}) {
      SCOPED_TRACE("budget " + std::to_string(budget) + ", asked " + std::to_string(asked));
      const auto split = resident_workgroup_split(budget, kCluster, kSms, asked);
      EXPECT_LE(split.gemm_blocks + split.side_blocks, budget);
      EXPECT_GE(split.gemm_blocks, kCluster);
      EXPECT_GE(split.side_blocks, kCluster);
      EXPECT_EQ(split.gemm_blocks % kCluster, 0);
      EXPECT_EQ(split.side_blocks % kCluster, 0);
      if (asked == 0) {  // the default, which leaves the GEMM at least half
        EXPECT_EQ(split.side_blocks, workgroup_split(budget, kCluster, kSms, 0, 0).side_blocks);
      }
    }
  const auto split = resident_workgroup_split(32, kCluster, kSms, 100000);
  EXPECT_EQ(split.side_blocks, 30);
  EXPECT_EQ(split.gemm_blocks, 2);
}

}  // namespace
