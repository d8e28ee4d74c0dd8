// NCCL as the benchmarks' baseline, where it can run: one GPU per rank and a build that found
// NCCL (IRIS_BENCH_HAVE_NCCL, benchmarks/CMakeLists.txt). NCCL refuses two ranks on one GPU,
// so where ranks share one the baseline is skipped, as it is where NCCL fails to start on any
// rank (every rank then goes on without it); note() and skipped() say why. Never NVLink
// multicast: the communicator is made with NCCL_NVLS_ENABLE=0.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "iris/iris.hpp"
#include "report.hpp"

#if IRIS_BENCH_HAVE_NCCL
#include <nccl.h>
#endif

namespace iris::bench {

/// True when two ranks of the job run on one GPU (collective).
inline bool ranks_share_a_gpu(Bootstrap& bootstrap) {
  const auto devices = device_of_each_rank(bootstrap);
  bool shared_gpu = false;
  for (std::size_t r = 0; r < devices.size(); ++r)
    for (std::size_t q = 0; q < r; ++q) shared_gpu |= devices[r] >= 0 && devices[r] == devices[q];
  return shared_gpu;
}

/// True when every rank runs on the same GPU (collective).
inline bool ranks_on_one_gpu(Bootstrap& bootstrap) {
  const auto devices = device_of_each_rank(bootstrap);
  for (int d : devices)
    if (d != devices[0]) return false;
  return true;
}

#if IRIS_BENCH_HAVE_NCCL
inline void nccl_check(ncclResult_t result, const char* call) {
  if (result != ncclSuccess)
    throw iris::Error(iris::Errc::kCuda, std::string("NCCL baseline: ") + call +
                                             " failed: " + ncclGetErrorString(result));
}
#endif

/// One NCCL communicator over all ranks of the job, made once (collectively) where NCCL can run.
class NcclBaseline {
 public:
  explicit NcclBaseline(Context& ctx) {
    const bool shared = ranks_share_a_gpu(ctx.bootstrap());
    const bool one_gpu = ranks_on_one_gpu(ctx.bootstrap());
    const std::string sharing = one_gpu ? "the ranks share one GPU" : "some ranks share a GPU";
#if IRIS_BENCH_HAVE_NCCL
    if (shared) {
      skip(one_gpu ? "ranks share one GPU" : "some ranks share a GPU",
           sharing + ", and NCCL refuses two ranks on one GPU");
      return;
    }
    start(ctx);
#else
    // The build comes first: it is what to change, whatever else a run shares.
    skip(shared ? "no NCCL in this build; ranks share a GPU" : "no NCCL in this build",
         "no NCCL in this build" +
             (shared ? "; besides, " + sharing + ", and NCCL refuses two ranks on one GPU" : ""));
#endif
  }
  ~NcclBaseline() {
#if IRIS_BENCH_HAVE_NCCL
    if (comm_ != nullptr) ncclCommDestroy(comm_);
#endif
  }
  NcclBaseline(const NcclBaseline&) = delete;
  NcclBaseline& operator=(const NcclBaseline&) = delete;

  /// Whether NCCL runs here; else skipped() says why, in a table cell's words.
  bool available() const { return skipped_.empty(); }
  const std::string& skipped() const { return skipped_; }
  /// A sentence for a table's title: measured, or skipped and why.
  const std::string& note() const { return note_; }

#if IRIS_BENCH_HAVE_NCCL
  /// The communicator (available() only).
  ncclComm_t comm() const { return comm_; }
#endif

  /// recv = the ranks' `send` blocks of `bytes` each, in rank order (ncclAllGather).
  void all_gather(const void* send, void* recv, std::size_t bytes, cudaStream_t stream) const {
#if IRIS_BENCH_HAVE_NCCL
    nccl_check(ncclAllGather(send, recv, bytes, ncclChar, comm_, stream), "ncclAllGather");
#else
    unavailable();
#endif
  }
  /// recv (`count` bf16) = the sum over ranks of this rank's block of `send` (ncclReduceScatter).
  void reduce_scatter(const __nv_bfloat16* send, __nv_bfloat16* recv, std::size_t count,
                      cudaStream_t stream) const {
#if IRIS_BENCH_HAVE_NCCL
    nccl_check(ncclReduceScatter(send, recv, count, ncclBfloat16, ncclSum, comm_, stream),
               "ncclReduceScatter");
#else
    unavailable();
#endif
  }
  /// recv (`count` bf16) = the sum over ranks of `send` (ncclAllReduce).
  void all_reduce(const __nv_bfloat16* send, __nv_bfloat16* recv, std::size_t count,
                  cudaStream_t stream) const {
#if IRIS_BENCH_HAVE_NCCL
    nccl_check(ncclAllReduce(send, recv, count, ncclBfloat16, ncclSum, comm_, stream),
               "ncclAllReduce");
#else
    unavailable();
#endif
  }

 private:
  void skip(const std::string& cell, const std::string& why) {
    skipped_ = "skipped: " + cell;
    note_ = "NCCL: skipped (" + why + ")";
  }

#if IRIS_BENCH_HAVE_NCCL
  /// Makes the communicator. An NCCL that cannot start (no transport it can use, a library the
  /// driver does not take, ...) must not end a job that measures iris too, nor leave some ranks
  /// with NCCL and others without: every rank tells the others how its start went, and unless
  /// all of them have a communicator, all go on without one, the note naming the first rank
  /// that failed and NCCL's words. (A rank whose peers fail before they reach NCCL's own
  /// rendezvous can still wait inside ncclCommInitRank: NCCL's wait, not ours.)
  void start(Context& ctx) {
    setenv("NCCL_NVLS_ENABLE", "0", 1);  // never NVLink multicast
    struct UniqueId {
      ncclUniqueId id;
      int result;
    } root{};
    if (ctx.rank() == 0) root.result = ncclGetUniqueId(&root.id);
    ctx.bootstrap().broadcast(&root, sizeof(root), 0);
    struct Outcome {
      int result;
      char what[248];
    } mine{};
    const char* call = "ncclGetUniqueId on rank 0";
    mine.result = root.result;
    if (root.result == ncclSuccess) {
      call = "ncclCommInitRank";
      mine.result = ncclCommInitRank(&comm_, ctx.world_size(), root.id, ctx.rank());
      if (mine.result != ncclSuccess) comm_ = nullptr;  // nothing to destroy
    }
    if (mine.result != ncclSuccess) {
      const char* detail = ncclGetLastError(nullptr);
      std::snprintf(mine.what, sizeof(mine.what), "%s failed: %s%s%s%s", call,
                    ncclGetErrorString(static_cast<ncclResult_t>(mine.result)),
                    detail != nullptr && *detail ? " (" : "", detail != nullptr ? detail : "",
                    detail != nullptr && *detail ? ")" : "");
    }
    std::vector<Outcome> all(ctx.world_size());
    ctx.bootstrap().allgather(&mine, all.data(), sizeof(Outcome));
    for (int r = 0; r < ctx.world_size(); ++r) {
      if (all[r].result == ncclSuccess) continue;
      // Abort, not destroy: a destroy may wait for peers that have no communicator.
      if (comm_ != nullptr) ncclCommAbort(comm_);
      comm_ = nullptr;
      all[r].what[sizeof(all[r].what) - 1] = '\0';
      skip("NCCL failed to start",
           "NCCL failed to start on rank " + std::to_string(r) + ": " + all[r].what);
      return;
    }
    note_ = "NCCL: measured, one GPU per rank, NCCL_NVLS_ENABLE=0";
  }
#else
  [[noreturn]] static void unavailable() {
    throw iris::Error(iris::Errc::kInvalidArgument,
                      "NCCL baseline: called in a build without NCCL (check available() first)");
  }
#endif

#if IRIS_BENCH_HAVE_NCCL
  ncclComm_t comm_ = nullptr;
#endif
  std::string skipped_;
  std::string note_;
};

}  // namespace iris::bench
