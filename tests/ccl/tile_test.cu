// Tile collectives (iris/ccl/device.hpp) called from a user kernel: each block all-reduces,
// all-gathers and reduce-scatters its own tile, as steps 0-2 of one kernel, then syncs, then
// all-gathers by ring out of place and in place (steps 4 and 5), then all-reduces by
// one_shot_pull and all-gathers by push (steps 6 and 7); the kernel runs several times, between
// host collectives on the same communicator (one epoch counter for both).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "ccl/common.cuh"

namespace {

using namespace ccl_test;
using iris_test::context;

constexpr int kBlocks = 4;
constexpr std::size_t kTile = 1000;

__global__ void tile_kernel(const __grid_constant__ iris::ccl::device::Communicator comm,
                            float* ar_out, const float* ar_in, float* ag_out, const float* ag_in,
                            float* rs_out, const float* rs_in, float* ring_out,
                            float* ring_in_place, float* pull_out, float* push_out) {
  namespace dev = iris::ccl::device;
  const std::uint64_t epoch = dev::begin(comm);
  const int c = static_cast<int>(blockIdx.x);
  const std::size_t n = comm.size();
  const std::size_t first = c * kTile;
  dev::all_reduce(iris::block{}, comm, {epoch, c, 0}, ar_out + first, ar_in + first, kTile,
                  ReduceOp::kSum);
  dev::all_gather(iris::block{}, comm, {epoch, c, 1}, ag_out + c * n * kTile, ag_in + first, kTile);
  dev::reduce_scatter(iris::block{}, comm, {epoch, c, 2}, rs_out + first, rs_in + c * n * kTile,
                      kTile, ReduceOp::kMax);
  dev::sync(iris::block{}, comm, {epoch, c, 3});
  // The ring, out of place and then in place (this member's part already at its slot), two
  // calls of one block in one kernel on their own steps.
  dev::all_gather(iris::block{}, comm, {epoch, c, 4}, ring_out + c * n * kTile, ag_in + first,
                  kTile, Algorithm::kRing);
  float* slots = ring_in_place + c * n * kTile;
  dev::all_gather(iris::block{}, comm, {epoch, c, 5}, slots, slots + comm.index * kTile, kTile,
                  Algorithm::kRing);
  dev::all_reduce(iris::block{}, comm, {epoch, c, 6}, pull_out + first, ar_in + first, kTile,
                  ReduceOp::kSum, Algorithm::kOneShotPull);
  dev::all_gather(iris::block{}, comm, {epoch, c, 7}, push_out + c * n * kTile, ag_in + first,
                  kTile, Algorithm::kPush);
  dev::end(comm, epoch);
}

float rs_value(int rank, std::size_t i) {
  return static_cast<float>((i * 13 + static_cast<std::size_t>(rank) * 101) % 1009);
}

TEST(CclTiles, UserKernelTilesBetweenHostCollectives) {
  iris::Context& ctx = context();
  auto& comm = world();
  const int n = comm.size();
  const std::size_t total = kBlocks * kTile;
  auto* mem = static_cast<float*>(ctx.allocate_bytes((5 * total + 5 * n * total) * sizeof(float)));
  float* ar_in = mem;
  float* ar_out = ar_in + total;
  float* ag_in = ar_out + total;
  float* rs_out = ag_in + total;
  float* ag_out = rs_out + total;
  float* rs_in = ag_out + n * total;
  float* ring_out = rs_in + n * total;
  float* ring_in_place = ring_out + n * total;
  float* pull_out = ring_in_place + n * total;
  float* push_out = pull_out + total;
  std::vector<float> a(total), g(total), r(n * total);
  for (std::size_t i = 0; i < total; ++i) {
    a[i] = static_cast<float>(pattern(ReduceOp::kSum, ctx.rank(), i));
    g[i] = static_cast<float>(ctx.rank() * 100000 + i);
  }
  for (std::size_t i = 0; i < n * total; ++i) r[i] = rs_value(ctx.rank(), i);
  upload(ar_in, a.data(), total * 4);
  upload(ag_in, g.data(), total * 4);
  upload(rs_in, r.data(), n * total * 4);
  for (int round = 0; round < 3; ++round) {
    poison(ar_out, total * 4);
    poison(ag_out, n * total * 4);
    poison(rs_out, total * 4);
    poison(ring_out, n * total * 4);
    poison(ring_in_place, n * total * 4);
    poison(pull_out, total * 4);
    poison(push_out, n * total * 4);
    // Every member's push lands in every member's push_out: nobody poisons it after a peer
    // has written.
    ctx.barrier();
    for (int c = 0; c < kBlocks; ++c)  // this member's part at its slot, for the in-place ring
      upload(ring_in_place + (c * n + comm.index()) * kTile, g.data() + c * kTile, kTile * 4);
    tile_kernel<<<kBlocks, 256>>>(comm.device(), ar_out, ar_in, ag_out, ag_in, rs_out, rs_in,
                                  ring_out, ring_in_place, pull_out, push_out);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    comm.barrier(nullptr);  // a host collective in between: the same epoch counter
    const auto ar = download(ar_out, total * 4);
    const auto ag = download(ag_out, n * total * 4);
    const auto rs = download(rs_out, total * 4);
    const auto ring = download(ring_out, n * total * 4);
    const auto ring_ip = download(ring_in_place, n * total * 4);
    const auto pull = download(pull_out, total * 4);
    const auto push = download(push_out, n * total * 4);
    const auto* pullf = reinterpret_cast<const float*>(pull.data());
    const auto* pushf = reinterpret_cast<const float*>(push.data());
    const auto* arf = reinterpret_cast<const float*>(ar.data());
    const auto* agf = reinterpret_cast<const float*>(ag.data());
    const auto* rsf = reinterpret_cast<const float*>(rs.data());
    for (std::size_t i = 0; i < total; ++i) {
      float sum = 0;
      for (int k = 0; k < n; ++k) sum += static_cast<float>(pattern(ReduceOp::kSum, k, i));
      ASSERT_EQ(arf[i], sum) << "all_reduce tile element " << i << " round " << round;
      ASSERT_EQ(pullf[i], sum) << "one_shot_pull all_reduce tile element " << i << " round "
                               << round;
    }
    const auto* ringf = reinterpret_cast<const float*>(ring.data());
    const auto* ring_ipf = reinterpret_cast<const float*>(ring_ip.data());
    for (int c = 0; c < kBlocks; ++c)
      for (int k = 0; k < n; ++k)
        for (std::size_t j = 0; j < kTile; ++j) {
          const std::size_t at = (c * n + k) * kTile + j;
          const auto want = static_cast<float>(k * 100000 + c * kTile + j);
          ASSERT_EQ(agf[at], want) << "all_gather tile " << c << " member " << k << " element " << j
                                   << " round " << round;
          ASSERT_EQ(ringf[at], want) << "ring all_gather tile " << c << " member " << k
                                     << " element " << j << " round " << round;
          ASSERT_EQ(ring_ipf[at], want) << "in-place ring all_gather tile " << c << " member " << k
                                        << " element " << j << " round " << round;
          ASSERT_EQ(pushf[at], want) << "push all_gather tile " << c << " member " << k
                                     << " element " << j << " round " << round;
        }
    for (int c = 0; c < kBlocks; ++c)
      for (std::size_t j = 0; j < kTile; ++j) {
        float want = 0;
        for (int k = 0; k < n; ++k)
          want = std::max(want, rs_value(k, c * n * kTile + comm.index() * kTile + j));
        ASSERT_EQ(rsf[c * kTile + j], want) << "reduce_scatter tile " << c << " element " << j;
      }
  }
  ctx.barrier();
  ctx.free_bytes(mem);
}

}  // namespace
