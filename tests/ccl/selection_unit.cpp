// CPU tests of how a call of iris::ccl is shaped (src/ccl/selection.hpp): which algorithm wins
// among the call's Options, IRIS_CCL_ALGORITHM, the table and the fallback, which entries are
// skipped, and how many blocks run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "ccl/selection.hpp"
#include "iris/ccl/detail/workspace.hpp"
#include "iris/host/error.hpp"

namespace {

using namespace iris::ccl;
using detail::Plan;
using detail::Selector;
using testing::HasSubstr;

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;

/// A communicator of 8 members sharing one GPU with the default workspace: 16 blocks for the
/// reducing collectives (of 33 that fit), 33 for the others (of 66).
Selector eight_members(TuningTable table = {}) {
  Selector s;
  s.team_size = 8;
  s.packet_bytes = 8 * MiB;
  s.staging_bytes = 8 * MiB;
  s.max_blocks = 16;
  s.move_max_blocks = 33;
  s.block_limit = 33;
  s.move_block_limit = 66;
  s.table = std::move(table);
  s.forced.fill(Algorithm::kAuto);
  return s;
}

template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const iris::Error& error) {
    EXPECT_EQ(error.code(), iris::Errc::kInvalidArgument);
    return error.message();
  }
  ADD_FAILURE() << "no iris::Error was thrown";
  return "";
}

TEST(CclSelection, TheCallBeatsTheEnvironmentWhichBeatsTheTable) {
  Selector s = eight_members(TuningTable::parse(
      R"({"entries": [{"collective": "all_reduce", "algorithm": "one_shot_push"}]})"));
  const std::size_t bytes = 4 * KiB;
  EXPECT_EQ(s.plan(Collective::kAllReduce, bytes, {}, false, "t").algorithm,
            Algorithm::kOneShotPush);
  s.forced[static_cast<int>(Collective::kAllReduce)] = Algorithm::kTwoShot;
  EXPECT_EQ(s.plan(Collective::kAllReduce, bytes, {}, false, "t").algorithm, Algorithm::kTwoShot);
  EXPECT_EQ(
      s.plan(Collective::kAllReduce, bytes, {.algorithm = Algorithm::kOneShotPull}, false, "t")
          .algorithm,
      Algorithm::kOneShotPull);
  // Forcing one collective leaves the others to the table.
  EXPECT_EQ(s.plan(Collective::kAllGather, bytes, {}, false, "t").algorithm, Algorithm::kPull);
}

TEST(CclSelection, EntriesThatCannotRunTheCallAreSkippedAndForcedOnesAreErrors) {
  Selector s = eight_members(TuningTable::parse(R"({"entries": [
    {"collective": "all_reduce", "algorithm": "one_shot"},
    {"collective": "all_reduce", "algorithm": "one_shot_pull"},
    {"collective": "all_reduce", "algorithm": "two_shot"}]})"));
  const std::size_t fits = s.message_capacity(Algorithm::kOneShot);
  EXPECT_EQ(fits, 256 * KiB);  // 8 MiB of packet slots, two parities, 8 senders, half payload
  EXPECT_EQ(s.plan(Collective::kAllReduce, fits, {}, false, "t").algorithm, Algorithm::kOneShot);
  // Too large for the packet slots: the next entry; in place as well: the one after.
  EXPECT_EQ(s.plan(Collective::kAllReduce, fits + 8, {}, false, "t").algorithm,
            Algorithm::kOneShotPull);
  EXPECT_EQ(s.plan(Collective::kAllReduce, fits + 8, {}, true, "t").algorithm, Algorithm::kTwoShot);
  EXPECT_THAT(
      message_of([&] {
        s.plan(Collective::kAllReduce, fits + 8, {.algorithm = Algorithm::kOneShot}, false,
               "all_reduce");
      }),
      HasSubstr("all_reduce: algorithm one_shot (forced by Options::algorithm) cannot run this "
                "call: the message is larger than the packet slots take"));
  s.forced[static_cast<int>(Collective::kAllReduce)] = Algorithm::kOneShotPull;
  EXPECT_THAT(message_of([&] { s.plan(Collective::kAllReduce, 64, {}, true, "all_reduce"); }),
              HasSubstr("(forced by IRIS_CCL_ALGORITHM) cannot run this call: one_shot_pull "
                        "cannot run in place"));
  EXPECT_THAT(message_of([&] {
                s.plan(Collective::kAllToAll, 64, {.algorithm = Algorithm::kRing}, false, "t");
              }),
              HasSubstr("the collective has no such algorithm"));
}

TEST(CclSelection, WithoutATableSmallAllReducesGoInPacketsAndTheRestPull) {
  Selector s = eight_members();
  EXPECT_EQ(s.plan(Collective::kAllReduce, 8, {}, false, "t").algorithm, Algorithm::kOneShot);
  EXPECT_EQ(s.plan(Collective::kAllReduce, detail::kFallbackOneShotBytes, {}, true, "t").algorithm,
            Algorithm::kOneShot);
  EXPECT_EQ(
      s.plan(Collective::kAllReduce, detail::kFallbackOneShotBytes + 8, {}, false, "t").algorithm,
      Algorithm::kTwoShot);
  // Smaller packet slots bound the one-shot before the fallback's own bound does.
  s.packet_bytes = 1 * MiB;
  EXPECT_EQ(s.plan(Collective::kAllReduce, 64 * KiB, {}, false, "t").algorithm,
            Algorithm::kTwoShot);
  for (Collective c : {Collective::kReduceScatter, Collective::kAllGather, Collective::kAllToAll,
                       Collective::kBroadcast, Collective::kGather, Collective::kScatter})
    EXPECT_EQ(s.plan(c, 64 * MiB, {}, false, "t").algorithm, Algorithm::kPull);
}

TEST(CclSelection, BlocksStayWithinTheBudgetUnlessTheCallAsksForMore) {
  // A table measured on a larger GPU (or alone on it) asks for 64 blocks.
  Selector s = eight_members(TuningTable::parse(R"({"entries": [
    {"collective": "all_reduce", "algorithm": "two_shot", "max_blocks": 64},
    {"collective": "all_gather", "algorithm": "pull", "max_blocks": 4}]})"));
  const std::size_t large = 256 * MiB;
  EXPECT_EQ(s.plan(Collective::kAllReduce, large, {}, false, "t").blocks, 16);
  // Below the budget, the table's own count.
  EXPECT_EQ(s.plan(Collective::kAllGather, large, {}, false, "t").blocks, 4);
  // The call may ask for more than the budget, up to what fits, and for fewer.
  EXPECT_EQ(s.plan(Collective::kAllReduce, large, {.max_blocks = 33}, false, "t").blocks, 33);
  EXPECT_EQ(s.plan(Collective::kAllReduce, large, {.max_blocks = 1}, false, "t").blocks, 1);
  EXPECT_EQ(s.plan(Collective::kAllGather, large, {.max_blocks = 66}, false, "t").blocks, 66);
  EXPECT_THAT(message_of([&] {
                s.plan(Collective::kAllReduce, large, {.max_blocks = 34}, false, "all_reduce");
              }),
              HasSubstr("all_reduce: Options::max_blocks 34 is more than the 33 blocks"));
  EXPECT_THAT(message_of([&] {
                s.plan(Collective::kAllGather, large, {.max_blocks = -1}, false, "all_gather");
              }),
              HasSubstr("all_gather: Options::max_blocks -1 is outside 0.."));
  // The budget itself where neither says.
  EXPECT_EQ(s.plan(Collective::kBroadcast, large, {}, false, "t").blocks, 33);
}

TEST(CclSelection, SmallMessagesTakeOneBlockPerChunk) {
  Selector s = eight_members();
  // The one-shots spread 2 KiB a block; the others 64 KiB.
  EXPECT_EQ(s.plan(Collective::kAllReduce, 8, {}, false, "t").blocks, 1);
  EXPECT_EQ(s.plan(Collective::kAllReduce, 2 * KiB + 1, {}, false, "t").blocks, 2);
  EXPECT_EQ(s.plan(Collective::kAllReduce, 64 * KiB, {}, false, "t").blocks, 16);
  EXPECT_EQ(s.plan(Collective::kAllGather, 64 * KiB, {}, false, "t").blocks, 1);
  EXPECT_EQ(s.plan(Collective::kAllGather, 64 * KiB + 1, {}, false, "t").blocks, 2);
  // A chunk of the call's own, then one of the table's.
  EXPECT_EQ(s.plan(Collective::kAllGather, 64 * KiB, {.chunk_bytes = 4 * KiB}, false, "t").blocks,
            16);
  s.table = TuningTable::parse(
      R"({"entries": [{"collective": "all_gather", "algorithm": "push", "chunk_bytes": 8192}]})");
  const Plan plan = s.plan(Collective::kAllGather, 64 * KiB, {}, false, "t");
  EXPECT_EQ(plan.algorithm, Algorithm::kPush);
  EXPECT_EQ(plan.chunk, 8 * KiB);
  EXPECT_EQ(plan.blocks, 8);
}

TEST(CclSelection, TheShippedTablePicksByTeamSizeAndBytes) {
  Selector s = eight_members(TuningTable::defaults());
  EXPECT_EQ(s.plan(Collective::kAllReduce, 4 * KiB, {}, false, "t").algorithm, Algorithm::kOneShot);
  EXPECT_EQ(s.plan(Collective::kAllReduce, 64 * KiB, {}, false, "t").algorithm,
            Algorithm::kOneShotPush);
  EXPECT_EQ(s.plan(Collective::kAllReduce, 64 * MiB, {}, false, "t").algorithm,
            Algorithm::kTwoShot);
  // A team of 3 takes the rows of teams up to 4.
  s.team_size = 3;
  EXPECT_EQ(s.plan(Collective::kAllReduce, 128 * KiB, {}, false, "t").algorithm,
            Algorithm::kOneShot);
  // A staging too small for the push: the table's next row that fits.
  s.team_size = 8;
  s.staging_bytes = 256 * KiB;
  EXPECT_EQ(s.plan(Collective::kAllReduce, 64 * KiB, {}, false, "t").algorithm,
            Algorithm::kTwoShot);
}

}  // namespace
