// Small-message packets: data and its ready flag travel in one store, so a receiver needs no
// separate flag round trip (the idea of NCCL's LL protocol and mscclpp's LL packets).
//
//   // sender: 8 payload bytes and the round number, written to rank `to`'s packet slot
//   iris::device::packet_put(ctx, slots + i, payload, round, to);
//   // receiver: spins (bounded) on its own slot until the round number shows in it
//   std::uint64_t v = iris::device::packet_wait(ctx, slots + i, round, from);
//
// A packet is 16 bytes: two 8-byte halves, each holding 4 payload bytes and a copy of the 32-bit
// flag. Each half is written and read as one naturally aligned 64-bit access, which the PTX
// memory model makes single-copy atomic, so a reader that sees the flag in a half sees that
// half's payload too; a packet is complete when both halves carry the flag. No fence, no
// release/acquire pair and no second store are needed: that is the whole saving. The price is
// half the bandwidth (8 payload bytes per 16 written), so packets are for messages of a few KiB
// to a few hundred KiB; bulk data goes with put/get and a completion action.
//
// Flags are round numbers that change on every use of a slot (an epoch: 1, 2, 3, ...); a slot
// starts as zeros, so flag 0 is never valid. A slot may be rewritten only when its reader is done
// with the previous round: double-buffer slots by round parity and let a later exchange (or the
// stream order of the reader's next send) prove the reader has moved on. Flags are 32 bits: a slot
// reused 2^32 times sees its flag repeat, and one left unwritten for 2^32 rounds may still hold a
// packet whose flag comes round again. Where rounds go on that long (a collective called for
// hours), let the reader empty each slot it has read (packet_empty) and never use flag 0: a slot
// then holds a packet only between its write and its read, so no old one can pass for a new round,
// whatever the flags (iris::ccl's all_reduces in packets do this).
//
// Ordering: a packet orders nothing but its own payload. Data written by other stores is not
// published by a packet; send it in packets too.
#pragma once

#include <cstddef>
#include <cstdint>

#include "iris/device/context.hpp"
#include "iris/device/coop.hpp"
#include "iris/device/detail/config.hpp"

namespace iris::device {

/// 16 bytes: {payload low word, flag, payload high word, flag}.
struct alignas(16) packet {
  std::uint32_t data0;
  std::uint32_t flag0;
  std::uint32_t data1;
  std::uint32_t flag1;
};

/// Payload bytes a packet carries.
inline constexpr std::size_t kPacketPayloadBytes = 8;

/// Packets needed to carry `bytes` payload bytes.
IRIS_HOST_DEVICE constexpr std::size_t packets_for(std::size_t bytes) {
  return (bytes + kPacketPayloadBytes - 1) / kPacketPayloadBytes;
}

/// Writes `payload` with `flag` into rank `to`'s copy of `*slot` (a pointer into this rank's heap)
/// with one 16-byte store. Does not wait for anything.
///   iris::device::packet_put(ctx, slot, value, round, peer);
IRIS_DEVICE_FN void packet_put(const Context& ctx, packet* slot, std::uint64_t payload,
                               std::uint32_t flag, int to);

/// Spins on this rank's `*slot` until both halves carry `flag`, then returns the payload. Bounded
/// by ctx.wait_timeout_ns(): the report names the slot, the flag waited for and seen, and
/// `from`, the rank expected to write it.
///   std::uint64_t v = iris::device::packet_wait(ctx, slot, round, sender);
IRIS_DEVICE_FN std::uint64_t packet_wait(const Context& ctx, const packet* slot, std::uint32_t flag,
                                         int from);

/// Empties this rank's `*slot` (zeros, as a slot starts): no flag but 0 passes for it. For the
/// reader, once it has read the packet; the slot's next writer must come after (the same rule
/// as for rewriting it). One 16-byte store, no wait.
///   std::uint64_t v = iris::device::packet_wait(ctx, slot, round, sender);
///   iris::device::packet_empty(slot);
IRIS_DEVICE_FN void packet_empty(packet* slot);

/// True (and the payload in `payload`) when both halves of this rank's `*slot` carry `flag`;
/// one read, no wait.
IRIS_DEVICE_FN bool packet_poll(const packet* slot, std::uint32_t flag, std::uint64_t& payload);

/// The group sends `bytes` bytes from local `src` (any alignment) into packets_for(bytes)
/// consecutive packets from rank `to`'s copy of `slots`; member r writes packets r, r + size, ...
/// Bytes past the end of `src` in the last packet are zeros.
///   iris::device::packet_put(iris::block{}, ctx, slots, src, bytes, round, peer);
template <cooperative_group G>
IRIS_DEVICE_FN void packet_put(G group, const Context& ctx, packet* slots, const void* src,
                               std::size_t bytes, std::uint32_t flag, int to);

/// The group waits for packets_for(bytes) packets of this rank's `slots` to carry `flag` and
/// unpacks their payload into local `dst` (`bytes` bytes). Each member waits for the packets it
/// unpacks only: sync the group before members read each other's part.
///   iris::device::packet_get(iris::block{}, ctx, dst, slots, bytes, round, sender);
template <cooperative_group G>
IRIS_DEVICE_FN void packet_get(G group, const Context& ctx, void* dst, const packet* slots,
                               std::size_t bytes, std::uint32_t flag, int from);

}  // namespace iris::device

#include "iris/device/detail/packet_impl.hpp"
