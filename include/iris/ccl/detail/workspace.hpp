// The layout of a communicator's workspace (one symmetric allocation, zeroed when the
// communicator is made; the same offsets on every rank). Not public.
//
//   Control         counts of the team's collectives and of each send/recv pair, the send/recv
//                   handshake's signals (see sync.hpp), the rooted pushes' root offset, and the
//                   argument check's packets (args.hpp)
//   packets         packet slots of the all_reduces in packets, [parity][...]: the one-shot's
//                   [sender][packet], the two-shot's results then contributions (below)
//   staging         the ring reduce_scatter's partial sums: per block of the call, kRingSlots
//                   slots that this rank writes and its right neighbour reads (ring.hpp); or the
//                   one-shot push all_reduce's rows, [parity][sender] (push_row_bytes below)
// The ring and the push share the staging: both meet the team (every block) between any call's
// writes into it and the next call's, which is what makes the sharing safe (docs/ccl.md).
// The block-to-block barriers are not here: they run on the communicator's barrier object
// (device::Communicator::barriers), which has its own memory.
#pragma once

#include <cstddef>
#include <cstdint>

namespace iris::ccl::detail {

/// Blocks one collective runs on at most: each block has its own barrier channel.
inline constexpr int kMaxChannels = 128;
/// Members of a team, and world ranks a send/recv may name.
inline constexpr int kMaxRanks = 128;
inline constexpr std::size_t kLine = 128;
/// sizeof(iris::device::packet) and its payload (checked where both are visible; this header
/// stays host C++).
inline constexpr std::size_t kPacketBytes = 16;
inline constexpr std::size_t kPacketPayload = 8;

/// A count of completed calls that every block of a kernel reads at its start and the last
/// block to finish advances (sync.hpp). Only this rank touches it.
struct alignas(kLine) EpochCounter {
  std::uint64_t value;
  std::uint32_t finished;  ///< blocks of the running kernel that have finished
};

struct Control {
  EpochCounter team;             ///< collectives of the team (every member runs each one)
  EpochCounter send[kMaxRanks];  ///< sends to world rank r
  EpochCounter recv[kMaxRanks];  ///< receives from world rank r
  /// ready[r]: the send sequence world rank r announced to this rank (a send to it).
  alignas(kLine) std::uint64_t ready[kMaxRanks];
  /// done[r]: the send sequence world rank r has finished reading from this rank (the last of
  /// its receiving blocks to finish says so).
  alignas(kLine) std::uint64_t done[kMaxRanks];
  /// With ready: heap offset and bytes of world rank r's send buffer.
  alignas(kLine) std::uint64_t send_offset[kMaxRanks];
  alignas(kLine) std::uint64_t send_bytes[kMaxRanks];
  /// The rooted pushes (gather, reduce): the heap offset of the root's dst, which the root
  /// writes here on every member before it meets the team (publish_root_dst, sync.hpp; one
  /// slot: a root's next call starts only once every member's blocks have left the call
  /// before, and so have read it).
  alignas(kLine) std::uint64_t root_dst;
  /// args[parity][word]: with debug checks, member 0's description of its call (packets
  /// flagged with the epoch; see args.hpp), which every other member compares with its own.
  alignas(kLine) std::uint64_t args[2][3][kPacketBytes / 8];
  /// The ring algorithms' signals (ring.hpp), one line per channel: ring_data[c][0] is what the
  /// left neighbour's block c announced it has ready for this rank's block c to read,
  /// ring_room[c][0] what the right neighbour's block c has finished reading of this rank's
  /// staging. One writer each.
  alignas(kLine) std::uint64_t ring_data[kMaxChannels][kLine / 8];
  alignas(kLine) std::uint64_t ring_room[kMaxChannels][kLine / 8];
};

/// Staging slots per block of the ring reduce_scatter (a queue of partial sums from a rank to
/// its right neighbour), and the sub-chunks a block takes through one step before the next
/// (half the slots: a rank writes one half while its neighbour reads the other).
inline constexpr int kRingSlots = 4;
inline constexpr int kRingGroup = kRingSlots / 2;
/// Bits of a ring signal's value that count items within one call ((epoch << kRingItemBits) +
/// item + 1): a call takes fewer than 2^20 items per channel.
inline constexpr unsigned kRingItemBits = 20;
inline constexpr std::uint64_t kRingItems = std::uint64_t{1} << kRingItemBits;

/// Bytes before the packet slots.
inline constexpr std::size_t kControlBytes = (sizeof(Control) + 255) / 256 * 256;

/// Packets of one sender in one parity of the one-shot's slots; a parity spans team_size of
/// these in both layouts, so that the two algorithms' parities never overlap.
inline constexpr std::size_t packets_per_sender(std::size_t packet_bytes, int team_size) {
  return packet_bytes / 2 / static_cast<std::size_t>(team_size) / kPacketBytes;
}

/// Payload bytes one sender can place in one parity of the packet slots (the one-shot's
/// largest message).
inline constexpr std::size_t packet_payload_capacity(std::size_t packet_bytes, int team_size) {
  return packets_per_sender(packet_bytes, team_size) * kPacketPayload;
}

// The two-shot all_reduce in packets (reduce_kernels.cu) deals the message's 8-byte words out in
// chunks: chunk q (words q c .. q c + c - 1) belongs to member q % n, which reduces it from every
// member's contribution and sends the result to every member. One parity of the slots is
//   results        [word]: the owner of each word writes its result here on every other member
//   contributions  [sender][slot]: each member writes its words of the chunks this member owns,
//                  at two_shot_slot(word)
// Word 0 always belongs to member 0, which hears from every member before it sends that result to
// all: so each call orders every member after every member's previous call, which is what lets a
// parity be rewritten two calls later (as the one-shot's).

/// Words per chunk: 32 (one warp's packets, stored together) unless the message has fewer than
/// 32 words per member, then fewer, so that the chunks still spread over the members.
inline constexpr std::size_t two_shot_chunk_words(std::size_t words, int team_size) {
  const std::size_t per_member = words / static_cast<std::size_t>(team_size);
  return per_member < 1 ? 1 : per_member > 32 ? 32 : per_member;
}

/// The member that reduces `word`.
inline constexpr int two_shot_owner(std::size_t word, std::size_t chunk, int team_size) {
  return static_cast<int>(word / chunk % static_cast<std::size_t>(team_size));
}

/// Where a sender's contribution to `word` lies in its contribution slots on the word's owner.
inline constexpr std::size_t two_shot_slot(std::size_t word, std::size_t chunk, int team_size) {
  return word / chunk / static_cast<std::size_t>(team_size) * chunk + word % chunk;
}

/// One parity of the two-shot's slots: results first, then one run of contribution slots per
/// sender.
struct TwoShotSlots {
  std::size_t results;        ///< packets of results (the largest message, in words)
  std::size_t contributions;  ///< contribution packets per sender
};

inline constexpr TwoShotSlots two_shot_slots(std::size_t packet_bytes, int team_size) {
  const std::size_t parity =
      packets_per_sender(packet_bytes, team_size) * static_cast<std::size_t>(team_size);
  const std::size_t results = parity / 2;
  return {results, (parity - results) / static_cast<std::size_t>(team_size)};
}

/// The two-shot's largest message in payload bytes: every word has a result slot, and the
/// chunks a member owns fit its contribution slots. (Below 32 words per member a chunk is
/// shorter and a member owns at most two, so 64 contribution slots always take them.)
inline constexpr std::size_t two_shot_payload_capacity(std::size_t packet_bytes, int team_size) {
  const TwoShotSlots s = two_shot_slots(packet_bytes, team_size);
  if (s.contributions < 64) return 0;
  const std::size_t owned = s.contributions / 32 * 32 * static_cast<std::size_t>(team_size);
  return (s.results < owned ? s.results : owned) * kPacketPayload;
}

/// The one-shot push all_reduce's row: the staging a sender's whole message takes on each
/// receiver in one parity, staging_bytes / 2 / team_size in whole 256-byte lines. A row holds the
/// message at the sender's `src` address modulo 16 (so that its vectors line up with src's).
inline constexpr std::size_t push_row_bytes(std::size_t staging_bytes, int team_size) {
  return staging_bytes / 2 / static_cast<std::size_t>(team_size) / 256 * 256;
}

/// The one-shot push's largest message in bytes (a row, less the 16 bytes its offset may take).
inline constexpr std::size_t push_payload_capacity(std::size_t staging_bytes, int team_size) {
  const std::size_t row = push_row_bytes(staging_bytes, team_size);
  return row < 256 ? 0 : row - 16;
}

}  // namespace iris::ccl::detail
