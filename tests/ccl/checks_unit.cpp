// CPU tests of iris::ccl's argument checks and of the selection table: its JSON form, the
// shipped defaults, the forcing variable; and of how a call is shaped (src/ccl/selection.hpp):
// which algorithm wins among the call's Options, IRIS_CCL_ALGORITHM, the table and the
// fallback, which entries are skipped, and how many blocks run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ccl/checks.hpp"
#include "ccl/selection.hpp"
#include "detail/mailbox_format.hpp"
#include "iris/ccl/detail/partition.hpp"
#include "iris/ccl/detail/workspace.hpp"
#include "iris/ccl/tuning.hpp"
#include "iris/device/detail/mailbox.hpp"
#include "iris/host/error.hpp"

namespace {

using namespace iris::ccl;
using detail::HeapRange;
using detail::Plan;
using detail::Selector;
using testing::HasSubstr;

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

TEST(CclChecks, TeamMustFitContainThisRankAndStayWithinLimits) {
  EXPECT_NO_THROW(detail::check_team({0, 4, 1}, 4, 3));
  EXPECT_NO_THROW(detail::check_team({1, 2, 2}, 4, 3));
  EXPECT_THAT(message_of([] { detail::check_team({1, 2, 2}, 4, 2); }),
              HasSubstr("does not contain this rank (2)"));
  EXPECT_THAT(message_of([] { detail::check_team({0, 3, 2}, 4, 0); }),
              HasSubstr("reaches past the world of 4 ranks"));
  EXPECT_THAT(message_of([] { detail::check_team({0, 0, 1}, 4, 0); }), HasSubstr("size >= 1"));
  EXPECT_THAT(message_of([] { detail::check_team({0, 1, 0}, 4, 0); }), HasSubstr("stride >= 1"));
  EXPECT_THAT(message_of([] { detail::check_team({0, 200, 1}, 200, 0); }),
              HasSubstr("at most 128 ranks"));
}

TEST(CclChecks, CountsThatOverflowAreErrors) {
  EXPECT_EQ(detail::checked_bytes(10, 4, "all_reduce"), 40u);
  const std::size_t huge = std::numeric_limits<std::size_t>::max() / 2;
  EXPECT_THAT(message_of([&] { detail::checked_bytes(huge, 4, "all_reduce"); }),
              HasSubstr("all_reduce: count"));
  EXPECT_THAT(message_of([&] { detail::checked_product(huge, 8, "all_gather"); }),
              HasSubstr("overflows"));
}

TEST(CclChecks, BuffersMustLieOnTheHeap) {
  alignas(16) static std::byte heap[4096];
  const HeapRange range{reinterpret_cast<std::uintptr_t>(heap),
                        reinterpret_cast<std::uintptr_t>(heap) + sizeof(heap)};
  EXPECT_NO_THROW(detail::check_on_heap(range, heap + 16, 4080, "all_reduce", "dst"));
  EXPECT_THAT(
      message_of([&] { detail::check_on_heap(range, heap + 16, 4081, "all_reduce", "dst"); }),
      HasSubstr("all_reduce: `dst`"));
  int stack_value = 0;
  EXPECT_THAT(
      message_of([&] { detail::check_on_heap(range, &stack_value, 4, "broadcast", "src"); }),
      HasSubstr("is not on the symmetric heap"));
  EXPECT_THAT(message_of([&] { detail::check_on_heap(range, nullptr, 4, "send", "src"); }),
              HasSubstr("`src` is null"));
}

TEST(CclChecks, RootsAndAliasing) {
  EXPECT_NO_THROW(detail::check_root(3, 4, "reduce"));
  EXPECT_THAT(message_of([] { detail::check_root(4, 4, "reduce"); }),
              HasSubstr("root 4 is not a member of the team (team indices 0..3)"));
  EXPECT_THAT(message_of([] { detail::check_root(-1, 4, "send", "peer"); }), HasSubstr("peer -1"));
  alignas(16) static std::byte buf[256];
  EXPECT_NO_THROW(detail::check_aliasing(buf, 64, buf + 64, 64, false, "x", "dst", "src", ""));
  EXPECT_NO_THROW(detail::check_aliasing(buf, 64, buf, 64, true, "x", "dst", "src", ""));
  EXPECT_THAT(message_of([] {
                detail::check_aliasing(buf, 64, buf, 64, false, "all_to_all", "dst", "src",
                                       "out of place only");
              }),
              HasSubstr("overlap in a way this call cannot take (out of place only)"));
  EXPECT_THAT(message_of([] {
                detail::check_aliasing(buf, 64, buf + 4, 64, true, "all_reduce", "dst", "src",
                                       "dst == src");
              }),
              HasSubstr("all_reduce: `dst`"));
}

/// Four world ranks in two teams of two ({0, 2, 2} and {1, 2, 2}), all alike.
std::vector<detail::CommunicatorSetup> two_teams_of_two() {
  std::vector<detail::CommunicatorSetup> all(4);
  for (int r = 0; r < 4; ++r)
    all[r] = {.team_start = r % 2,
              .team_size = 2,
              .team_stride = 2,
              .threads = 256,
              .move_in_flight = 8,
              .packet_bytes = 8 << 20,
              .staging_bytes = 8 << 20,
              .selection = 42};
  return all;
}

TEST(CclChecks, MembersMustMakeTheirCommunicatorAlike) {
  const iris::team evens{0, 2, 2}, odds{1, 2, 2};
  auto all = two_teams_of_two();
  for (int r = 0; r < 4; ++r)
    EXPECT_NO_THROW(detail::check_setups_agree(all, r % 2 ? odds : evens, r));
  // Another team's settings are its own business.
  all[1].threads = 512;
  all[3].threads = 512;
  EXPECT_NO_THROW(detail::check_setups_agree(all, evens, 0));
  // Within a team, every member sees the difference, so every member throws.
  all = two_teams_of_two();
  all[2].packet_bytes = 1 << 20;
  EXPECT_THAT(message_of([&] { detail::check_setups_agree(all, evens, 0); }),
              HasSubstr("CommunicatorOptions::packet_bytes is 8388608 on world rank 0 but 1048576 "
                        "on world rank 2 (team {start 0, size 2, stride 2})"));
  EXPECT_THAT(message_of([&] { detail::check_setups_agree(all, evens, 2); }),
              HasSubstr("is 1048576 on world rank 2 but 8388608 on world rank 0"));
  all = two_teams_of_two();
  all[2].selection = 7;
  EXPECT_THAT(message_of([&] { detail::check_setups_agree(all, evens, 0); }),
              HasSubstr("the selection table (IRIS_CCL_TUNING) or the forced algorithms "
                        "(IRIS_CCL_ALGORITHM) on world rank 0 differ from those on world rank 2"));
  all = two_teams_of_two();
  all[2].move_in_flight = 4;
  EXPECT_THAT(message_of([&] { detail::check_setups_agree(all, evens, 2); }),
              HasSubstr("IRIS_CCL_MOVE_VECTORS"));
  // A member that names another team: both ends find out.
  all = two_teams_of_two();
  all[2].team_start = 0;
  all[2].team_size = 4;
  all[2].team_stride = 1;
  EXPECT_THAT(message_of([&] { detail::check_setups_agree(all, evens, 0); }),
              HasSubstr("the team is {start 0, size 2, stride 2} on world rank 0 but {start 0, "
                        "size 4, stride 1} on world rank 2"));
  EXPECT_THAT(message_of([&] { detail::check_setups_agree(all, {0, 4, 1}, 2); }),
              HasSubstr("the team is {start 0, size 4, stride 1} on world rank 2 but {start 0, "
                        "size 2, stride 2} on world rank 0"));
}

TEST(CclChecks, TheSelectionHashIsStableAndSeesEveryCharacter) {
  EXPECT_EQ(detail::stable_hash(""), 14695981039346656037ull);
  EXPECT_EQ(detail::stable_hash("a"), 0xaf63dc4c8601ec8cull);  // FNV-1a's published value
  EXPECT_NE(detail::stable_hash("one_shot"), detail::stable_hash("one_shop"));
  EXPECT_EQ(detail::stable_hash(TuningTable::defaults().to_json()),
            detail::stable_hash(TuningTable::defaults().to_json()));
}

TEST(CclTuning, ParsesEntriesAndRoundTrips) {
  const auto table = TuningTable::parse(R"({"entries": [
    {"collective": "all_reduce", "team_min": 2, "team_max": 8, "bytes_max": 65536,
     "algorithm": "one_shot", "max_blocks": 16, "chunk_bytes": 4096},
    {"collective": "all_gather", "bytes_min": 1048576, "algorithm": "push"},
    {"collective": "all_reduce", "algorithm": "two_shot"}]})");
  ASSERT_EQ(table.entries().size(), 3u);
  const TuningEntry& e = table.entries()[0];
  EXPECT_EQ(e.collective, Collective::kAllReduce);
  EXPECT_EQ(e.team_min, 2);
  EXPECT_EQ(e.team_max, 8);
  EXPECT_EQ(e.bytes_max, 65536u);
  EXPECT_EQ(e.algorithm, Algorithm::kOneShot);
  EXPECT_EQ(e.max_blocks, 16);
  EXPECT_EQ(e.chunk_bytes, 4096u);
  auto c = table.candidates(Collective::kAllReduce, 4, 1000);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0]->algorithm, Algorithm::kOneShot);
  c = table.candidates(Collective::kAllReduce, 16, 1000);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0]->algorithm, Algorithm::kTwoShot);
  EXPECT_TRUE(table.candidates(Collective::kAllGather, 4, 1000).empty());
  const auto again = TuningTable::parse(table.to_json());
  ASSERT_EQ(again.entries().size(), 3u);
  EXPECT_EQ(again.to_json(), table.to_json());
  EXPECT_EQ(again.entries()[1].bytes_min, 1048576u);
  EXPECT_EQ(again.entries()[1].bytes_max, std::numeric_limits<std::size_t>::max());
}

TEST(CclTuning, BadTablesSayWhereAndWhat) {
  EXPECT_THAT(message_of([] { TuningTable::parse("[]", "t.json"); }),
              HasSubstr("t.json: the table must be a JSON object at byte 0"));
  EXPECT_THAT(message_of([] { TuningTable::parse("{}", "t.json"); }),
              HasSubstr("missing \"entries\""));
  EXPECT_THAT(message_of([] { TuningTable::parse(R"({"entries": [{"algorithm": "pull"}]})"); }),
              HasSubstr("entry without \"collective\""));
  EXPECT_THAT(
      message_of([] {
        TuningTable::parse(R"({"entries": [{"collective": "all_reduce", "algorithm": "tree"}]})");
      }),
      HasSubstr("unknown algorithm \"tree\""));
  EXPECT_THAT(
      message_of([] {
        TuningTable::parse(R"({"entries": [{"collective": "all_reduce", "algorithm": "ring"}]})");
      }),
      HasSubstr("all_reduce has no algorithm ring"));
  EXPECT_THAT(message_of([] {
                TuningTable::parse(
                    R"({"entries": [{"collective": "all_gather", "algorithm": "two_shot"}]})");
              }),
              HasSubstr("all_gather has no algorithm two_shot"));
  EXPECT_THAT(
      message_of([] {
        TuningTable::parse(
            R"({"entries": [{"collective": "all_reduce", "algorithm": "one_shot", "bytes_max": -1}]})");
      }),
      HasSubstr("\"bytes_max\" must be a whole number"));
  EXPECT_THAT(
      message_of([] {
        TuningTable::parse(
            R"({"entries": [{"collective": "all_reduce", "algorithm": "one_shot", "colour": 1}]})");
      }),
      HasSubstr("unknown key \"colour\""));
  EXPECT_THAT(message_of([] { TuningTable::parse(R"({"entries": [)"); }),
              HasSubstr("unexpected end"));
  EXPECT_THAT(message_of([] { TuningTable::from_file("/nonexistent/tuning.json"); }),
              HasSubstr("cannot read the tuning table \"/nonexistent/tuning.json\""));
}

TEST(CclTuning, DefaultsCoverAllReduceAndParseBack) {
  const auto table = TuningTable::defaults();
  auto small = table.candidates(Collective::kAllReduce, 8, 4096);
  ASSERT_FALSE(small.empty());
  EXPECT_EQ(small[0]->algorithm, Algorithm::kOneShot);
  auto mid = table.candidates(Collective::kAllReduce, 2, 256 << 10);
  ASSERT_FALSE(mid.empty());
  EXPECT_EQ(mid[0]->algorithm, Algorithm::kOneShot);
  mid = table.candidates(Collective::kAllReduce, 8, 64 << 10);
  ASSERT_FALSE(mid.empty());
  EXPECT_EQ(mid[0]->algorithm, Algorithm::kOneShotPush);
  mid = table.candidates(Collective::kAllReduce, 8, 512 << 10);
  ASSERT_FALSE(mid.empty());
  EXPECT_EQ(mid[0]->algorithm, Algorithm::kTwoShot);
  auto large = table.candidates(Collective::kAllReduce, 8, std::size_t{1} << 30);
  ASSERT_FALSE(large.empty());
  EXPECT_EQ(large[0]->algorithm, Algorithm::kTwoShot);
  EXPECT_EQ(TuningTable::parse(table.to_json()).to_json(), table.to_json());
  // The shipped table leaves reduce_scatter to its fallback (pull): the ring gains nothing
  // where ranks share one GPU's HBM, where it was measured.
  EXPECT_TRUE(table.candidates(Collective::kReduceScatter, 8, std::size_t{64} << 20).empty());
  // gather push at every size and team size; reduce pull up to 16 KiB, push above.
  const auto first = [&](Collective c, int team, std::size_t bytes) {
    const auto found = table.candidates(c, team, bytes);
    return found.empty() ? Algorithm::kAuto : found[0]->algorithm;
  };
  for (int team : {2, 8}) {
    for (std::size_t bytes : {std::size_t{1}, std::size_t{256} << 20})
      EXPECT_EQ(first(Collective::kGather, team, bytes), Algorithm::kPush) << bytes;
    for (std::size_t bytes : {std::size_t{1}, std::size_t{16} << 10})
      EXPECT_EQ(first(Collective::kReduce, team, bytes), Algorithm::kPull) << bytes;
    for (std::size_t bytes : {(std::size_t{16} << 10) + 1, std::size_t{256} << 20})
      EXPECT_EQ(first(Collective::kReduce, team, bytes), Algorithm::kPush) << bytes;
  }
}

TEST(CclTuning, RingReduceScatterEntriesParseAndPrint) {
  const auto table = TuningTable::parse(
      R"({"entries": [{"collective": "reduce_scatter", "team_min": 4, "bytes_min": 1048576,)"
      R"( "algorithm": "ring", "max_blocks": 32}]})");
  ASSERT_EQ(table.entries().size(), 1u);
  EXPECT_EQ(table.entries()[0].algorithm, Algorithm::kRing);
  EXPECT_EQ(table.entries()[0].max_blocks, 32);
  EXPECT_EQ(table.candidates(Collective::kReduceScatter, 8, 2 << 20).size(), 1u);
  EXPECT_TRUE(table.candidates(Collective::kReduceScatter, 2, 2 << 20).empty());
  EXPECT_TRUE(table.candidates(Collective::kReduceScatter, 8, 4096).empty());
  EXPECT_EQ(TuningTable::parse(table.to_json()).to_json(), table.to_json());
}

TEST(CclTuning, ForcedAlgorithmsFromTheEnvironmentForm) {
  const auto forced = parse_forced_algorithms("all_reduce=two_shot,all_gather=push");
  EXPECT_EQ(forced[static_cast<int>(Collective::kAllReduce)], Algorithm::kTwoShot);
  EXPECT_EQ(forced[static_cast<int>(Collective::kAllGather)], Algorithm::kPush);
  EXPECT_EQ(forced[static_cast<int>(Collective::kBroadcast)], Algorithm::kAuto);
  EXPECT_THAT(message_of([] { parse_forced_algorithms("all_reduce"); }),
              HasSubstr("is not collective=algorithm"));
  EXPECT_THAT(message_of([] { parse_forced_algorithms("allreduce=two_shot"); }),
              HasSubstr("unknown collective \"allreduce\""));
  EXPECT_THAT(message_of([] { parse_forced_algorithms("broadcast=push"); }),
              HasSubstr("broadcast has no algorithm push"));
  // The rings: all_gather's and reduce_scatter's, forcible by the environment's form.
  const auto rings = parse_forced_algorithms("reduce_scatter=ring,all_gather=ring");
  EXPECT_EQ(rings[static_cast<int>(Collective::kReduceScatter)], Algorithm::kRing);
  EXPECT_EQ(rings[static_cast<int>(Collective::kAllGather)], Algorithm::kRing);
  EXPECT_THAT(message_of([] { parse_forced_algorithms("reduce_scatter=push"); }),
              HasSubstr("reduce_scatter has no algorithm push"));
  EXPECT_THAT(message_of([] { parse_forced_algorithms("all_to_all=ring"); }),
              HasSubstr("all_to_all has no algorithm ring"));
  EXPECT_TRUE(collective_has(Collective::kReduceScatter, Algorithm::kRing));
  EXPECT_TRUE(collective_has(Collective::kReduceScatter, Algorithm::kPull));
  EXPECT_FALSE(collective_has(Collective::kReduceScatter, Algorithm::kTwoShot));
  EXPECT_FALSE(collective_has(Collective::kReduce, Algorithm::kRing));
  // reduce: pull and push.
  EXPECT_EQ(parse_forced_algorithms("reduce=push")[static_cast<int>(Collective::kReduce)],
            Algorithm::kPush);
  EXPECT_TRUE(collective_has(Collective::kReduce, Algorithm::kPull));
  // all_to_all: pull and push; all_to_allv only pulls.
  EXPECT_EQ(parse_forced_algorithms("all_to_all=push")[static_cast<int>(Collective::kAllToAll)],
            Algorithm::kPush);
  EXPECT_FALSE(collective_has(Collective::kAllToAllv, Algorithm::kPush));
  // gather: pull and push; scatter only pulls.
  EXPECT_EQ(parse_forced_algorithms("gather=push")[static_cast<int>(Collective::kGather)],
            Algorithm::kPush);
  EXPECT_FALSE(collective_has(Collective::kGather, Algorithm::kRing));
  EXPECT_FALSE(collective_has(Collective::kScatter, Algorithm::kPush));
  EXPECT_EQ(to_string(Algorithm::kOneShotPull), "one_shot_pull");
  EXPECT_EQ(parse_algorithm("one_shot_pull"), Algorithm::kOneShotPull);
  EXPECT_EQ(to_string(Algorithm::kOneShotPush), "one_shot_push");
  EXPECT_EQ(parse_algorithm("one_shot_push"), Algorithm::kOneShotPush);
  EXPECT_TRUE(collective_has(Collective::kAllReduce, Algorithm::kOneShotPush));
  EXPECT_FALSE(collective_has(Collective::kAllGather, Algorithm::kOneShotPush));
  EXPECT_EQ(to_string(Algorithm::kTwoShotPackets), "two_shot_packets");
  EXPECT_EQ(parse_algorithm("two_shot_packets"), Algorithm::kTwoShotPackets);
  EXPECT_EQ(to_string(Algorithm::kRing), "ring");
  EXPECT_TRUE(collective_has(Collective::kAllReduce, Algorithm::kTwoShotPackets));
  EXPECT_FALSE(collective_has(Collective::kReduceScatter, Algorithm::kTwoShotPackets));
  EXPECT_EQ(parse_forced_algorithms(
                "all_reduce=two_shot_packets")[static_cast<int>(Collective::kAllReduce)],
            Algorithm::kTwoShotPackets);
  EXPECT_EQ(to_string(DataType::kBFloat16), "bfloat16");
  EXPECT_EQ(to_string(ReduceOp::kAvg), "avg");
}

/// The two-shot all_reduce in packets for a message of `words` 8-byte words: every word has one
/// owner, word 0's is member 0, every member owns a word when there are enough, and each
/// sender's contributions to one owner land in distinct slots inside its run of slots.
void expect_two_shot_layout(std::size_t packet_bytes, int n, std::size_t words) {
  SCOPED_TRACE(testing::Message() << n << " members, " << packet_bytes << " packet bytes, " << words
                                  << " words");
  const detail::TwoShotSlots slots = detail::two_shot_slots(packet_bytes, n);
  // Both layouts span the same parity: the two algorithms' parities never overlap.
  ASSERT_LE(slots.results + static_cast<std::size_t>(n) * slots.contributions,
            detail::packets_per_sender(packet_bytes, n) * static_cast<std::size_t>(n));
  ASSERT_LE(words, slots.results);
  const std::size_t chunk = detail::two_shot_chunk_words(words, n);
  ASSERT_GE(chunk, 1u);
  ASSERT_LE(chunk, 32u);
  EXPECT_EQ(detail::two_shot_owner(0, chunk, n), 0);
  std::vector<std::vector<bool>> used(n, std::vector<bool>(slots.contributions, false));
  std::vector<std::size_t> owned(n, 0);
  for (std::size_t i = 0; i < words; ++i) {
    const int o = detail::two_shot_owner(i, chunk, n);
    ASSERT_GE(o, 0);
    ASSERT_LT(o, n);
    const std::size_t s = detail::two_shot_slot(i, chunk, n);
    ASSERT_LT(s, slots.contributions) << "word " << i;
    ASSERT_FALSE(used[o][s]) << "word " << i << " shares slot " << s << " on member " << o;
    used[o][s] = true;
    ++owned[o];
  }
  if (words >= static_cast<std::size_t>(n)) {
    for (int k = 0; k < n; ++k) EXPECT_GT(owned[k], 0u) << "member " << k;
  }
  if (words >= 32 * static_cast<std::size_t>(n)) {
    // Whole chunks of 32: the members' shares differ by at most one chunk.
    const auto [fewest, most] = std::minmax_element(owned.begin(), owned.end());
    EXPECT_LE(*most - *fewest, 32u);
  }
}

TEST(CclTwoShotPackets, EveryWordHasOneOwnerAndASlotOfItsOwn) {
  for (int n : {1, 2, 3, 4, 5, 7, 8, 16, 128}) {
    for (std::size_t packet_bytes :
         {std::size_t{8} << 20, std::size_t{1} << 20, std::size_t{64} << 10,
          std::size_t{2} * static_cast<std::size_t>(n) * detail::kPacketBytes}) {
      const std::size_t capacity = detail::two_shot_payload_capacity(packet_bytes, n);
      EXPECT_EQ(capacity % detail::kPacketPayload, 0u);
      const std::size_t most = capacity / detail::kPacketPayload;
      if (most == 0) continue;
      // Every size through the short chunks (below 32 words a member) and past them; large
      // teams in strides.
      const std::size_t stride = n > 16 ? 37 : 1;
      for (std::size_t words = 1; words <= std::min<std::size_t>(most, 40 * n + 3); words += stride)
        expect_two_shot_layout(packet_bytes, n, words);
      for (std::size_t words : {most / 3 + 1, most - 1, most})
        if (words >= 1) expect_two_shot_layout(packet_bytes, n, words);
    }
  }
}

TEST(CclTwoShotPackets, CapacityIsAnEighthOfTheSlotsAndTheSmallestSlotsTakeNothing) {
  // The default 8 MiB: a 1 MiB message, whatever the team (a little less where the members do
  // not divide the slots evenly); the one-shot's is a quarter of the slots over the team.
  EXPECT_EQ(detail::two_shot_payload_capacity(std::size_t{8} << 20, 8), std::size_t{1} << 20);
  EXPECT_EQ(detail::two_shot_payload_capacity(std::size_t{8} << 20, 2), std::size_t{1} << 20);
  EXPECT_GT(detail::two_shot_payload_capacity(std::size_t{8} << 20, 3), std::size_t{1000} << 10);
  EXPECT_EQ(detail::packet_payload_capacity(std::size_t{8} << 20, 8), std::size_t{256} << 10);
  // The smallest slots a communicator takes (two packets per member) hold no two-shot message.
  EXPECT_EQ(detail::two_shot_payload_capacity(2 * 8 * detail::kPacketBytes, 8), 0u);
}

TEST(CclPartition, ShardsCoverEveryElementOnceFromAlignedStarts) {
  // The host's reduce push and the tile collectives' two-shot both cut by shard_elements: the
  // shards [k * per, min((k + 1) * per, count)) must tile [0, count) with 16-byte starts.
  for (const std::size_t es : {1, 2, 4, 8}) {
    for (const int members : {1, 2, 3, 4, 7, 8}) {
      for (const std::size_t count : {0, 1, 2, 15, 16, 17, 255, 1000, 4099}) {
        const std::size_t per = detail::shard_elements(count, members, es);
        std::size_t covered = 0;
        for (int k = 0; k < members; ++k) {
          const std::size_t first = std::min(count, per * static_cast<std::size_t>(k));
          const std::size_t last = std::min(count, first + per);
          if (first < count) {
            EXPECT_EQ(first * es % 16, 0u)
                << "es " << es << " members " << members << " count " << count << " shard " << k;
          }
          EXPECT_EQ(first, covered);
          covered = last;
        }
        EXPECT_EQ(covered, count) << "es " << es << " members " << members << " count " << count;
        EXPECT_LE(per, count);
      }
    }
  }
}

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

// The report a member makes when its call differs from member 0's (IRIS_DEBUG_CHECKS; the
// device side is exercised by the multi-rank test arg_mismatch).
TEST(CclChecks, ArgumentMismatchReportNamesCallArgumentValuesAndRank) {
  using namespace iris::device::detail;
  iris::device::ErrorMailbox m{};
  m.state = MailboxState::kComplete;
  m.kind = ErrorKind::kArgumentMismatch;
  std::strncpy(m.operation, "ccl all_reduce: count", sizeof(m.operation) - 1);
  m.rank = 1;
  m.target_rank = 0;
  m.expected = 2048;
  m.observed = 4096;
  EXPECT_EQ(iris::detail::mailbox_report(m).value(),
            "rank 1: ccl all_reduce: count differs across the team: 2048 here, 4096 on rank 0 "
            "(every member must make the same collective call: the same count, type, op, root "
            "and in-place-ness) (block 0, thread 0)");
  EXPECT_FALSE(iris::detail::mailbox_is_timeout(m));
}
