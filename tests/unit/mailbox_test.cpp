// The host side of device error reports: how a filled ErrorMailbox reads as a message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "detail/mailbox_format.hpp"
#include "iris/device/detail/mailbox.hpp"

namespace {

using iris::detail::mailbox_is_timeout;
using iris::detail::mailbox_report;
using iris::device::ErrorMailbox;
using iris::device::detail::Awaited;
using iris::device::detail::ErrorKind;
using iris::device::detail::MailboxState;
using iris::device::detail::ValueKind;

ErrorMailbox complete(ErrorKind kind, const char* operation) {
  ErrorMailbox m{};
  m.state = MailboxState::kComplete;
  m.kind = kind;
  std::strncpy(m.operation, operation, sizeof(m.operation) - 1);
  return m;
}

TEST(Mailbox, ZeroedIsEmpty) {
  const ErrorMailbox m{};
  EXPECT_FALSE(mailbox_report(m).has_value());
  EXPECT_FALSE(mailbox_is_timeout(m));
}

TEST(Mailbox, WaitTimeoutNamesRankOffsetConditionAndObservedValue) {
  ErrorMailbox m = complete(ErrorKind::kWaitTimeout, "wait_until");
  m.rank = 1;
  m.target_rank = 1;
  m.heap_offset = 0x100040;
  m.comparison = iris::cmp::ge;
  m.expected = 5;
  m.observed = 3;
  m.elapsed_ns = 2'000'000'000;
  EXPECT_EQ(mailbox_report(m).value(),
            "rank 1: wait_until(heap offset 0x100040 on rank 1, ge 5) timed out after 2.0 s, "
            "observed 3 (block 0, thread 0)");
  EXPECT_TRUE(mailbox_is_timeout(m));
}

TEST(Mailbox, SignedValuesShortDurationsAndThreeDimensionalIndices) {
  ErrorMailbox m = complete(ErrorKind::kWaitTimeout, "barrier(grid)");
  m.rank = 3;
  m.target_rank = 3;
  m.heap_offset = 0x80;
  m.comparison = iris::cmp::eq;
  m.value_kind = ValueKind::kSigned;
  m.expected = static_cast<std::uint64_t>(std::int64_t{-2});
  m.observed = static_cast<std::uint64_t>(std::int64_t{-7});
  m.elapsed_ns = 250'000'000;
  m.block[0] = 4, m.block[1] = 1;
  m.thread[0] = 31, m.thread[2] = 2;
  EXPECT_EQ(mailbox_report(m).value(),
            "rank 3: barrier(grid)(heap offset 0x80 on rank 3, eq -2) timed out after 250.0 ms, "
            "observed -7 (block (4,1,0), thread (31,0,2))");
}

TEST(Mailbox, DebugCheckViolations) {
  ErrorMailbox bad_rank = complete(ErrorKind::kBadRank, "put");
  bad_rank.rank = 0;
  bad_rank.target_rank = 9;
  bad_rank.world_size = 8;
  bad_rank.thread[0] = 3;
  EXPECT_EQ(mailbox_report(bad_rank).value(),
            "rank 0: put: rank 9 is not in the world of 8 ranks (block 0, thread 3)");
  EXPECT_FALSE(mailbox_is_timeout(bad_rank));

  ErrorMailbox outside = complete(ErrorKind::kOutsideHeap, "get");
  outside.rank = 2;
  outside.target_rank = 1;
  outside.heap_offset = -0x40;
  outside.bytes = 256;
  outside.heap_size = 0x40000000;
  EXPECT_EQ(mailbox_report(outside).value(),
            "rank 2: get: 256 bytes at heap offset -0x40 on rank 1 are not inside the heap of "
            "0x40000000 bytes (not a symmetric heap pointer?) (block 0, thread 0)");

  ErrorMailbox shapes = complete(ErrorKind::kShapeMismatch, "copy");
  shapes.expected = (std::uint64_t{4} << 32) | 8;
  shapes.observed = (std::uint64_t{4} << 32) | 7;
  EXPECT_EQ(
      mailbox_report(shapes).value(),
      "rank 0: copy: the destination tile is 4 x 8, the source tile 4 x 7 (block 0, thread 0)");
}

TEST(Mailbox, LimitsOfTheBarrier) {
  ErrorMailbox ranks = complete(ErrorKind::kTooManyRanks, "barrier(block)");
  ranks.expected = 128;
  ranks.observed = 144;
  EXPECT_EQ(mailbox_report(ranks).value(),
            "rank 0: barrier(block): the world has 144 ranks, more than the 128 it supports "
            "(block 0, thread 0)");
  ErrorMailbox blocks = complete(ErrorKind::kTooManyBlocks, "barrier(block)");
  blocks.expected = 512;
  blocks.observed = 600;
  EXPECT_EQ(mailbox_report(blocks).value(),
            "rank 0: barrier(block): block 600 is past the 512 blocks it supports (block 0, "
            "thread 0)");
}

TEST(Mailbox, BarrierTimeoutsNameWhoDidNotCome) {
  ErrorMailbox peer = complete(ErrorKind::kWaitTimeout, "barrier(block)");
  peer.awaited = Awaited::kRank;
  peer.awaited_rank = 3;
  peer.expected = 7;
  peer.observed = 6;
  peer.elapsed_ns = 2'000'000'000;
  peer.thread[0] = 3;
  EXPECT_EQ(mailbox_report(peer).value(),
            "rank 0: barrier(block) timed out after 2.0 s waiting for rank 3 to arrive at epoch 7 "
            "(it has reached epoch 6; does every rank run this barrier as often?) (block 0, "
            "thread 3)");
  EXPECT_TRUE(mailbox_is_timeout(peer));

  ErrorMailbox blocks = complete(ErrorKind::kWaitTimeout, "barrier(grid)");
  blocks.awaited = Awaited::kGridBlocks;
  blocks.expected = 263;
  blocks.observed = 130;
  blocks.elapsed_ns = 1'000'000;
  EXPECT_EQ(mailbox_report(blocks).value(),
            "rank 0: barrier(grid) timed out after 1.0 ms waiting for the grid's other 263 blocks, "
            "of which 130 arrived; a grid barrier needs every block of the grid resident at once: "
            "launch at most cudaOccupancyMaxActiveBlocksPerMultiprocessor x SMs blocks (block 0, "
            "thread 0)");

  ErrorMailbox release = complete(ErrorKind::kWaitTimeout, "barrier(grid)");
  release.awaited = Awaited::kGridRelease;
  release.elapsed_ns = 1'000'000;
  release.block[0] = 5;
  EXPECT_EQ(mailbox_report(release).value(),
            "rank 0: barrier(grid) timed out after 1.0 ms waiting for block 0 to release the grid "
            "(it waits for every other block, then for the other ranks); a grid barrier needs "
            "every block of the grid resident at once: launch at most "
            "cudaOccupancyMaxActiveBlocksPerMultiprocessor x SMs blocks (block 5, thread 0)");
}

TEST(Mailbox, PacketTimeoutsNameTheSenderTheRoundAndACollectivesTeam) {
  // packet_wait: the sender and the round; the slot still holds an older round's packet.
  ErrorMailbox bare = complete(ErrorKind::kWaitTimeout, "packet_wait");
  bare.awaited = Awaited::kPacket;
  bare.awaited_rank = 2;
  bare.expected = 12;
  bare.observed = 10;
  bare.elapsed_ns = 500'000'000;
  EXPECT_EQ(mailbox_report(bare).value(),
            "rank 0: packet_wait timed out after 500.0 ms waiting for rank 2's packet of round 12 "
            "(the slot holds round 10's; does that rank send this round?) (block 0, thread 0)");
  EXPECT_TRUE(mailbox_is_timeout(bare));
  // An iris::ccl all_reduce in packets: the collective, the call's epoch and the team.
  ErrorMailbox ccl = bare;
  std::strncpy(ccl.operation, "ccl all_reduce (packets)", sizeof(ccl.operation) - 1);
  ccl.team_start = 0;
  ccl.team_size = 8;
  ccl.team_stride = 1;
  ccl.observed = 0;
  EXPECT_EQ(mailbox_report(ccl).value(),
            "rank 0: ccl all_reduce (packets) timed out after 500.0 ms waiting for rank 2's "
            "packet of round 12 (the slot holds round 0's; does every member of the team {start "
            "0, size 8, stride 1} make this call?) (block 0, thread 0)");
}

TEST(Mailbox, BarrierObjectReportsNameTheChannelAndTheTeam) {
  ErrorMailbox late = complete(ErrorKind::kWaitTimeout, "barrier wait");
  late.awaited = Awaited::kChannelRank;
  late.awaited_rank = 5;
  late.channel = 2;
  late.expected = 9;
  late.observed = 8;
  late.elapsed_ns = 30'000'000'000;
  late.thread[0] = 1;
  EXPECT_EQ(mailbox_report(late).value(),
            "rank 0: barrier wait timed out after 30.0 s on channel 2 waiting for rank 5 to "
            "arrive at epoch 9 (it has reached epoch 8; does every member of the team arrive on "
            "this channel as often?) (block 0, thread 1)");
  EXPECT_TRUE(mailbox_is_timeout(late));
  // With the object's team (what barrier objects report): its shape in the question.
  late.team_start = 1;
  late.team_size = 4;
  late.team_stride = 2;
  EXPECT_EQ(mailbox_report(late).value(),
            "rank 0: barrier wait timed out after 30.0 s on channel 2 waiting for rank 5 to "
            "arrive at epoch 9 (it has reached epoch 8; does every member of the team {start 1, "
            "size 4, stride 2} arrive on this channel as often?) (block 0, thread 1)");

  ErrorMailbox outsider = complete(ErrorKind::kNotInTeam, "barrier sync");
  outsider.rank = 3;
  outsider.expected = 4;
  outsider.observed = (std::uint64_t{4} << 32) | 2;
  EXPECT_EQ(mailbox_report(outsider).value(),
            "rank 3: barrier sync: rank 3 is not a member of the barrier's team (4 members, "
            "start 4, stride 2) (block 0, thread 0)");
  EXPECT_FALSE(mailbox_is_timeout(outsider));

  ErrorMailbox channel = complete(ErrorKind::kBadChannel, "barrier arrive");
  channel.expected = 4;
  channel.observed = 4;
  EXPECT_EQ(mailbox_report(channel).value(),
            "rank 0: barrier arrive: channel 4 is not below the 4 channels the barrier object "
            "has (block 0, thread 0)");

  ErrorMailbox twice = complete(ErrorKind::kArriveTwice, "barrier arrive");
  twice.channel = 1;
  twice.expected = 2;
  twice.observed = 3;
  EXPECT_EQ(mailbox_report(twice).value(),
            "rank 0: barrier arrive: a second arrive on channel 1 before the wait for its arrival "
            "at epoch 3 (the channel completed epoch 2; on one channel a group alternates arrive "
            "and wait) (block 0, thread 0)");
  EXPECT_FALSE(mailbox_is_timeout(twice));

  ErrorMailbox stale = complete(ErrorKind::kStaleToken, "barrier wait");
  stale.channel = 1;
  stale.expected = 5;
  stale.observed = 3;
  EXPECT_EQ(mailbox_report(stale).value(),
            "rank 0: barrier wait: the token is for epoch 3 on channel 1, but the channel's "
            "latest arrival is at epoch 5 (wait with the token of the last arrive) (block 0, "
            "thread 0)");
  EXPECT_FALSE(mailbox_is_timeout(stale));

  ErrorMailbox groups = complete(ErrorKind::kTooManyWarpGroups, "signal");
  groups.expected = 2;
  groups.observed = 8;
  groups.bytes = std::uint64_t{576} << 40 | std::uint64_t{1} << 20 | 1;
  groups.thread[0] = 512;
  EXPECT_EQ(mailbox_report(groups).value(),
            "rank 0: signal: iris::warps<2> group 8 has no named barrier to sync on (blockDim "
            "576 makes 9 groups; warps<N> has ids 8-15 for groups 0-7: give the others an "
            "iris::warp_span with an id of their own) (block 0, thread 512)");
  groups.bytes = std::uint64_t{64} << 40 | std::uint64_t{9} << 20 | 1;
  EXPECT_THAT(mailbox_report(groups).value(), testing::HasSubstr("(blockDim (64,9,1) makes 9"));

  ErrorMailbox member = complete(ErrorKind::kBadMember, "translate");
  member.target_rank = 4;
  member.world_size = 8;
  member.expected = 4;
  member.observed = (std::uint64_t{0} << 32) | 2;
  EXPECT_EQ(mailbox_report(member).value(),
            "rank 0: translate: member 4 is not in the team of 4 members (start 0, stride 2) in "
            "the world of 8 ranks (block 0, thread 0)");
}

TEST(Mailbox, BadAlgorithmNamesTheValue) {
  ErrorMailbox m = complete(ErrorKind::kBadAlgorithm, "ccl all_gather: bad algorithm");
  m.observed = 3;
  EXPECT_EQ(mailbox_report(m).value(),
            "rank 0: ccl all_gather: bad algorithm: iris::ccl::Algorithm 3 is not one that this "
            "device collective implements (iris/ccl/device.hpp lists each one's) (block 0, "
            "thread 0)");
  EXPECT_FALSE(mailbox_is_timeout(m));
}

TEST(Mailbox, MessageTooLargeNamesTheSenderAndBothSizes) {
  ErrorMailbox m = complete(ErrorKind::kMessageTooLarge, "ccl recv");
  m.rank = 1;
  m.target_rank = 0;
  m.expected = 4096;
  m.observed = 8192;
  EXPECT_EQ(mailbox_report(m).value(),
            "rank 1: ccl recv: rank 0 sends 8192 bytes, more than the 4096 bytes the receive "
            "buffer holds (nothing was copied) (block 0, thread 0)");
  EXPECT_FALSE(mailbox_is_timeout(m));
}

TEST(Mailbox, BadStepNamesTheStepAndTheLimit) {
  ErrorMailbox m = complete(ErrorKind::kBadStep, "ccl all_reduce");
  m.expected = 128;
  m.observed = 130;
  EXPECT_EQ(mailbox_report(m).value(),
            "rank 0: ccl all_reduce: Round step 130 is not below the 128 steps of a kernel's "
            "epoch (a block's tile collectives in one kernel take steps 0, 1, ...; a later step "
            "would meet the next call's exchanges) (block 0, thread 0)");
}

TEST(Mailbox, BadCountNamesTheTableTheRankAndTheValue) {
  ErrorMailbox m = complete(ErrorKind::kBadCount, "ccl all_to_allv send_counts");
  m.target_rank = 3;
  m.value_kind = ValueKind::kSigned;
  m.observed = static_cast<std::uint64_t>(std::int64_t{-5});
  EXPECT_EQ(mailbox_report(m).value(),
            "rank 0: ccl all_to_allv send_counts of rank 3 holds -5 (counts and offsets must be 0 "
            "or more) (block 0, thread 0)");
}

TEST(Mailbox, UnfinishedOrUnknownReportsStillSaySomething) {
  ErrorMailbox writing{};
  writing.state = MailboxState::kWriting;
  EXPECT_EQ(mailbox_report(writing).value(),
            "a device thread began an error report but did not finish it");
  ErrorMailbox unknown = complete(static_cast<ErrorKind>(99), "mystery");
  EXPECT_EQ(mailbox_report(unknown).value(),
            "rank 0: mystery: unknown device error kind 99 (block 0, thread 0)");
}

TEST(Mailbox, OperationNameNeedsNoTerminator) {
  ErrorMailbox m = complete(ErrorKind::kBadRank, "");
  std::memset(m.operation, 'x', sizeof(m.operation));
  m.world_size = 1;
  m.target_rank = 1;
  EXPECT_EQ(mailbox_report(m).value(), "rank 0: " + std::string(sizeof(m.operation), 'x') +
                                           ": rank 1 is not in the world of 1 ranks (block 0, "
                                           "thread 0)");
}

TEST(Cmp, Names) {
  EXPECT_EQ(iris::to_string(iris::cmp::eq), "eq");
  EXPECT_EQ(iris::to_string(iris::cmp::ne), "ne");
  EXPECT_EQ(iris::to_string(iris::cmp::lt), "lt");
  EXPECT_EQ(iris::to_string(iris::cmp::le), "le");
  EXPECT_EQ(iris::to_string(iris::cmp::gt), "gt");
  EXPECT_EQ(iris::to_string(iris::cmp::ge), "ge");
}

}  // namespace
