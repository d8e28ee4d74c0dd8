// iris::ccl::Communicator: the collectives of one team, stream-ordered, on the symmetric heap.
//
//   iris::Context ctx = iris::Context::from_env();
//   iris::ccl::Communicator comm(ctx);                         // the world; collective
//   auto x = ctx.zeros<float>(n);
//   comm.all_reduce(x.data(), x.data(), n, iris::ccl::ReduceOp::kSum, stream);   // in place
//
// Made once per (Context, team): it allocates its workspace (flag slots, epochs, packet slots)
// from the symmetric heap at construction, which is collective over the whole world: every rank
// makes one, in the same order as its other allocations, each naming the team it belongs to
// (tensor-parallel groups: ranks 0-3 pass {0, 4, 1}, ranks 4-7 pass {4, 4, 1}).
// The members of a team must make it alike: the same team, CommunicatorOptions (but
// max_blocks: the smallest counts) and selection (IRIS_CCL_TUNING, IRIS_CCL_ALGORITHM);
// construction compares them and throws on every member, naming what differs and where.
//
// Every call:
//   - is stream-ordered: it queues kernels on `stream` and returns; it never allocates, never
//     synchronizes the host, and may be captured in a CUDA graph and replayed any number of
//     times (the epochs that order the calls live on the device);
//   - must be made by every member of the team (send/recv: by both ends), in the same order,
//     with the same counts, types, operations, roots and options; calls on one communicator
//     must not run concurrently (one stream at a time; make a second communicator for a second
//     stream);
//   - takes buffers on the symmetric heap (this rank's copies, e.g. Buffer::data()), the same
//     allocations (heap offsets) on every member, since a kernel reaches a member's buffer by
//     translating its own pointer; anything off the heap is an iris::Error naming the argument.
//     A call is in place on every member or on none;
//   - gives the same bits on every run, whatever the timing: each algorithm adds the members'
//     contributions in an order fixed by the team alone. Every algorithm but the ring
//     reduce_scatter adds them in team order (member 0 first), so they agree bit for bit with
//     each other and every member gets the same all_reduce result; the ring reduce_scatter adds
//     part j in ring order, member j + 1 first and member j last (docs/ccl.md): the same
//     integers, but floating-point sums and products (and min/max among signed zeros or NaNs)
//     that can differ from team order in the last bits;
//   - waits (bounded by IRIS_WAIT_TIMEOUT) for the other members' kernels; a member that never
//     comes makes the others' kernels report which rank and which collective, and trap; the
//     next synchronization on those ranks throws that report.
// Counts are in elements; a "part" is `count` elements of one member. A team call whose count
// (or bytes, or rows) is 0 returns on the host and launches nothing, so it must be 0 on every
// member: where it is 0 on some only, the others' kernels report those members as missing
// (their debug checks cannot compare a call that never launched).
// Kernels spin on each other: ranks that share a GPU must have their blocks resident together.
// The default SM budget (CommunicatorOptions::max_blocks) is half of what fits, so that two
// calls in flight (a send and its recv, two communicators) fit too; a budget above it is the
// caller's promise that no more than one call runs at a time, and one above what fits
// (block_limit) is an iris::Error.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <type_traits>

#include "iris/ccl/handle.hpp"
#include "iris/ccl/tuning.hpp"
#include "iris/ccl/types.hpp"
#include "iris/device/team.hpp"
#include "iris/host/context.hpp"

namespace iris::ccl {

struct CommunicatorOptions {
  /// Bytes of packet slots for the all_reduces in packets: the one-shot's largest message is
  /// about a quarter of this divided by the team size, the two-shot's about an eighth of it
  /// (message_capacity); default 8 MiB.
  std::size_t packet_bytes = std::size_t{8} << 20;
  /// Bytes of staging (a multiple of 256) for the ring reduce_scatter's partial sums and the
  /// one-shot push all_reduce's messages (0: neither). A ring call of B blocks gives each block
  /// staging_bytes / B, in four slots; fewer blocks run when a slot would be smaller than 256
  /// bytes. Larger slots make the ring's stall after each slot rarer (docs/ccl.md has what that
  /// is worth). The push's largest message is about staging_bytes / 2 / team size
  /// (message_capacity). The same on every member (as packet_bytes). Default 32 MiB.
  std::size_t staging_bytes = std::size_t{32} << 20;
  /// Blocks a call uses at most (SM budget); 0: per kind of kernel (reducing, moving), half the
  /// blocks of it the GPU holds at once, divided by the ranks that share the GPU, at most 128
  /// (the smallest value across the team). Half, so that any two of the collectives' kernels
  /// (a send and its receive, or calls of two communicators) are resident together. More than
  /// fits at all (Communicator::block_limit) is an iris::Error.
  int max_blocks = 0;
  /// Threads per block of the collectives' kernels (32..512).
  int threads = 256;
};

class Communicator {
 public:
  /// Collective over the world (see the top). `team` must contain this rank.
  explicit Communicator(Context& ctx, iris::team team, const CommunicatorOptions& options = {});
  /// The world.
  explicit Communicator(Context& ctx, const CommunicatorOptions& options = {});
  /// Frees the workspace: collective over the world, like construction; waits for the
  /// communicator's kernels first.
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;

  const iris::team& team() const;
  /// This rank's index in the team.
  int index() const;
  int size() const;
  /// Blocks a call of `collective` uses at most unless its Options say otherwise.
  int max_blocks(Collective collective) const;
  /// The smallest of them (the reducing collectives' budget, by default).
  int max_blocks() const;
  /// The most blocks a call of `collective` may take: its kernel's blocks that the GPU holds at
  /// once, divided among the ranks that share the GPU (the smallest across the team). A call's
  /// blocks wait for every member's, so all must be resident; a budget above this
  /// (CommunicatorOptions::max_blocks, Options::max_blocks) is an iris::Error. A tuning
  /// table's entry is cut to max_blocks(collective): only a call's Options go above the budget.
  int block_limit(Collective collective) const;
  /// Largest all_reduce (bytes) that `algorithm` takes, for the ones that store the message in
  /// the communicator's workspace: kOneShot and kTwoShotPackets (the packet slots,
  /// CommunicatorOptions::packet_bytes) and kOneShotPush (a sender's staging row,
  /// CommunicatorOptions::staging_bytes). Another algorithm is an iris::Error.
  std::size_t message_capacity(Algorithm algorithm) const;
  /// Why `algorithm` cannot run a call of `collective` of `bytes` bytes per member (the part of
  /// one member: count times the element size), in place or not; empty when it can. A call
  /// that forces such an algorithm throws this reason; the selection table skips it.
  std::string_view cannot_run(Collective collective, Algorithm algorithm, std::size_t bytes,
                              bool in_place = false) const;
  /// The handle for kernels that call the tile collectives (iris/ccl/device.hpp).
  device::Communicator device() const;
  /// The algorithm a call with these arguments runs (what kAuto resolves to).
  Algorithm select(Collective collective, std::size_t bytes, const Options& options = {},
                   bool in_place = false) const;
  const TuningTable& tuning() const;

  // ---- reductions ------------------------------------------------------------------------

  /// dst = op over members of src (count elements each), on every member. In place: dst == src.
  void all_reduce(void* dst, const void* src, std::size_t count, DataType type, ReduceOp op,
                  cudaStream_t stream, const Options& options = {});
  /// dst (count elements) = op over members of their src part `index()` (src: size() * count).
  /// In place: dst == src + index() * count. kPull: each member reads its part of every
  /// member's src (team order); kRing: partial sums travel around the ring in chunks, each
  /// member reading from its left neighbour only (ring order, see the top).
  ///   comm.reduce_scatter(shard, grads, n / comm.size(), ReduceOp::kSum, stream,
  ///                       {.algorithm = iris::ccl::Algorithm::kRing});
  void reduce_scatter(void* dst, const void* src, std::size_t count, DataType type, ReduceOp op,
                      cudaStream_t stream, const Options& options = {});
  /// On member `root` (a team index): dst = op over members of src. Others' dst is unused (may
  /// be null). kPull (the default table's up to 16 KiB): the root reads every member's src and
  /// reduces all of it; kPush (above): member k reduces shard k from every member's src and
  /// writes it into the root's dst, so every member's blocks reduce. The same team order either
  /// way.
  void reduce(void* dst, const void* src, std::size_t count, DataType type, ReduceOp op, int root,
              cudaStream_t stream, const Options& options = {});

  // ---- movement (bytes; the typed forms below take any trivially copyable type) ------------

  /// dst (size() parts) = every member's src part, in team order. In place: src == dst +
  /// index() * bytes on every member.
  void all_gather_bytes(void* dst, const void* src, std::size_t bytes, cudaStream_t stream,
                        const Options& options = {});
  /// The 2-D all_gather (column blocks of a row-major matrix): member k's `rows` x `row_bytes`
  /// block of src (rows `src_pitch` bytes apart) lands at bytes [k * row_bytes, (k + 1) *
  /// row_bytes) of each of dst's `rows` rows (`dst_pitch` bytes apart, at least size() *
  /// row_bytes). In place: src == dst + index() * row_bytes and src_pitch == dst_pitch, on every
  /// member. Always pulls (Options::algorithm kAuto or kPull; another is an iris::Error).
  void all_gather_2d_bytes(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                           std::size_t rows, std::size_t row_bytes, cudaStream_t stream,
                           const Options& options = {});
  /// Part k of dst = part index() of member k's src (both size() parts). Out of place only.
  void all_to_all_bytes(void* dst, const void* src, std::size_t bytes, cudaStream_t stream,
                        const Options& options = {});
  /// Per-peer counts and offsets (elements of `element_bytes` bytes), each a size()-entry
  /// std::int64_t array on the symmetric heap (so that they may be computed on the device):
  /// dst[recv_offsets[k] ...] = member k's src[member k's send_offsets[index()] ...], of member
  /// k's send_counts[index()] elements, which must be at most recv_counts[k]. Out of place
  /// only. The kernel checks the tables before it copies anything: a negative entry, a send
  /// larger than its recv_counts or a part past the heap is reported and traps (the next
  /// synchronization throws the report), with nothing written.
  void all_to_allv_bytes(void* dst, const std::int64_t* recv_counts,
                         const std::int64_t* recv_offsets, const void* src,
                         const std::int64_t* send_counts, const std::int64_t* send_offsets,
                         std::size_t element_bytes, cudaStream_t stream,
                         const Options& options = {});
  /// dst = member root's src, on every member. In place: dst == src on every member.
  void broadcast_bytes(void* dst, const void* src, std::size_t bytes, int root, cudaStream_t stream,
                       const Options& options = {});
  /// On the root: part k of dst = member k's src. In place: src == dst + index() * bytes on
  /// every member (dst then names the same allocation everywhere); out of place, only the
  /// root's dst is used (the others may pass any pointer). kPush (the shipped choice): each
  /// member writes its part into the root's dst; kPull: the root reads every part.
  void gather_bytes(void* dst, const void* src, std::size_t bytes, int root, cudaStream_t stream,
                    const Options& options = {});
  /// dst = part index() of the root's src. In place on the root: dst == src + root * bytes.
  /// Only the root's src is read, so only the root's dst must not overlap its src otherwise.
  void scatter_bytes(void* dst, const void* src, std::size_t bytes, int root, cudaStream_t stream,
                     const Options& options = {});
  /// Sends src to team member `peer`, which calls recv; returns (on the stream) once the peer
  /// has read it. Sends to one peer are received in order, one recv each; an empty send (0
  /// bytes) is a message too, and still needs its recv. Only the two ends take part: the other
  /// members need not call anything.
  void send_bytes(const void* src, std::size_t bytes, int peer, cudaStream_t stream,
                  const Options& options = {});
  /// Receives what member `peer` sends into dst, which holds `bytes`: the sender's size counts
  /// (dst past it is untouched). A sender of more than `bytes` is reported by the receiving
  /// kernel, which copies nothing and traps (the next synchronization throws the report). The
  /// two ends' Options need not agree.
  void recv_bytes(void* dst, std::size_t bytes, int peer, cudaStream_t stream,
                  const Options& options = {});
  /// Every member's earlier work on its stream is done and visible before any member goes on.
  void barrier(cudaStream_t stream);

  // ---- typed forms -------------------------------------------------------------------------

  template <class T>
  void all_reduce(T* dst, const T* src, std::size_t count, ReduceOp op, cudaStream_t stream,
                  const Options& options = {}) {
    all_reduce(dst, src, count, data_type_of<T>(), op, stream, options);
  }
  template <class T>
  void reduce_scatter(T* dst, const T* src, std::size_t count, ReduceOp op, cudaStream_t stream,
                      const Options& options = {}) {
    reduce_scatter(dst, src, count, data_type_of<T>(), op, stream, options);
  }
  template <class T>
  void reduce(T* dst, const T* src, std::size_t count, ReduceOp op, int root, cudaStream_t stream,
              const Options& options = {}) {
    reduce(dst, src, count, data_type_of<T>(), op, root, stream, options);
  }
  template <class T>
  void all_gather(T* dst, const T* src, std::size_t count, cudaStream_t stream,
                  const Options& options = {}) {
    static_assert(std::is_trivially_copyable_v<T>, "iris::ccl: only trivially copyable data moves");
    all_gather_bytes(dst, src, bytes_of<T>(count, "all_gather"), stream, options);
  }
  /// dst: rows x (size() * cols) elements, row stride `ldd`; src: rows x cols, row stride
  /// `lds`; member k's src lands in columns [k * cols, (k + 1) * cols).
  template <class T>
  void all_gather_2d(T* dst, std::size_t ldd, const T* src, std::size_t lds, std::size_t rows,
                     std::size_t cols, cudaStream_t stream, const Options& options = {}) {
    static_assert(std::is_trivially_copyable_v<T>, "iris::ccl: only trivially copyable data moves");
    all_gather_2d_bytes(dst, bytes_of<T>(ldd, "all_gather_2d"), src,
                        bytes_of<T>(lds, "all_gather_2d"), rows, bytes_of<T>(cols, "all_gather_2d"),
                        stream, options);
  }
  template <class T>
  void all_to_all(T* dst, const T* src, std::size_t count, cudaStream_t stream,
                  const Options& options = {}) {
    static_assert(std::is_trivially_copyable_v<T>, "iris::ccl: only trivially copyable data moves");
    all_to_all_bytes(dst, src, bytes_of<T>(count, "all_to_all"), stream, options);
  }
  template <class T>
  void all_to_allv(T* dst, const std::int64_t* recv_counts, const std::int64_t* recv_offsets,
                   const T* src, const std::int64_t* send_counts, const std::int64_t* send_offsets,
                   cudaStream_t stream, const Options& options = {}) {
    static_assert(std::is_trivially_copyable_v<T>, "iris::ccl: only trivially copyable data moves");
    all_to_allv_bytes(dst, recv_counts, recv_offsets, src, send_counts, send_offsets, sizeof(T),
                      stream, options);
  }
  template <class T>
  void broadcast(T* dst, const T* src, std::size_t count, int root, cudaStream_t stream,
                 const Options& options = {}) {
    static_assert(std::is_trivially_copyable_v<T>, "iris::ccl: only trivially copyable data moves");
    broadcast_bytes(dst, src, bytes_of<T>(count, "broadcast"), root, stream, options);
  }
  template <class T>
  void gather(T* dst, const T* src, std::size_t count, int root, cudaStream_t stream,
              const Options& options = {}) {
    static_assert(std::is_trivially_copyable_v<T>, "iris::ccl: only trivially copyable data moves");
    gather_bytes(dst, src, bytes_of<T>(count, "gather"), root, stream, options);
  }
  template <class T>
  void scatter(T* dst, const T* src, std::size_t count, int root, cudaStream_t stream,
               const Options& options = {}) {
    static_assert(std::is_trivially_copyable_v<T>, "iris::ccl: only trivially copyable data moves");
    scatter_bytes(dst, src, bytes_of<T>(count, "scatter"), root, stream, options);
  }
  template <class T>
  void send(const T* src, std::size_t count, int peer, cudaStream_t stream,
            const Options& options = {}) {
    static_assert(std::is_trivially_copyable_v<T>, "iris::ccl: only trivially copyable data moves");
    send_bytes(src, bytes_of<T>(count, "send"), peer, stream, options);
  }
  template <class T>
  void recv(T* dst, std::size_t count, int peer, cudaStream_t stream, const Options& options = {}) {
    static_assert(std::is_trivially_copyable_v<T>, "iris::ccl: only trivially copyable data moves");
    recv_bytes(dst, bytes_of<T>(count, "recv"), peer, stream, options);
  }

 private:
  template <class T>
  static std::size_t bytes_of(std::size_t count, const char* what) {
    return checked_bytes(count, sizeof(T), what);
  }
  static std::size_t checked_bytes(std::size_t count, std::size_t element, const char* what);

  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace iris::ccl
