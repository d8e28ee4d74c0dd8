// Bootstrap: how the ranks of one job find each other and exchange a few bytes before (and
// beside) the symmetric heap.
//
// A Bootstrap is an interface of three collectives on host bytes. Iris ships three kinds:
//   - the rendezvous that `iris-run` serves on a Unix socket (IRIS_BOOTSTRAP=unix:@name);
//   - a TCP rendezvous served by rank 0 for ranks started by torchrun, mpirun or srun;
//   - FunctionBootstrap, which wraps a collective the application already has (an MPI
//     communicator, a torch store, ...).
// Every collective must be called by all ranks in the same order. None of them hangs forever:
// a rank that does not arrive within the timeout gives every other rank an iris::Error that
// names the missing ranks.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace iris {

/// The collectives that ranks use to set up (and check) shared state. Every rank must call
/// them in the same order; calls on one Bootstrap are not thread-safe (one thread at a time).
/// The shipped implementations report failures as iris::Error: kTimeout when a rank does not
/// arrive in time (naming it), kBootstrap when a rank vanished or the rendezvous is gone,
/// kMismatch when ranks call different collectives or pass different sizes, kInvalidArgument
/// for bad arguments. After a failure a rendezvous Bootstrap stays failed: every later call
/// throws.
class Bootstrap {
 public:
  virtual ~Bootstrap() = default;

  virtual int rank() const noexcept = 0;
  virtual int world_size() const noexcept = 0;

  /// Collective. Every rank contributes `bytes` bytes from `send`; on return `recv` holds
  /// world_size() * bytes, rank r's contribution at offset r * bytes. `bytes` must be equal on
  /// all ranks (a difference is reported as iris::Error(kMismatch)). `send` and `recv` may be
  /// null only when `bytes` is 0.
  virtual void allgather(const void* send, void* recv, std::size_t bytes) = 0;

  /// Collective. Copies `bytes` bytes at `data` on rank `root` to `data` on every rank. The
  /// default implementation is an allgather that keeps the root's part.
  virtual void broadcast(void* data, std::size_t bytes, int root);

  /// Collective. Returns on any rank only after every rank has entered it. The default
  /// implementation is an allgather of one byte.
  virtual void barrier();
};

/// Adapts a collective the application already has. `allgather` must behave as
/// Bootstrap::allgather (e.g. a lambda that calls MPI_Allgather on MPI_BYTE); broadcast and
/// barrier are built on it.
class FunctionBootstrap final : public Bootstrap {
 public:
  using AllgatherFn = std::function<void(const void* send, void* recv, std::size_t bytes)>;
  FunctionBootstrap(int rank, int world_size, AllgatherFn allgather);

  int rank() const noexcept override { return rank_; }
  int world_size() const noexcept override { return world_size_; }
  void allgather(const void* send, void* recv, std::size_t bytes) override;

 private:
  int rank_;
  int world_size_;
  AllgatherFn allgather_;
};

/// The bootstrap of a process that runs alone (world size 1).
std::unique_ptr<Bootstrap> make_single_rank_bootstrap();

/// Connects to a rendezvous at `endpoint` ("unix:@abstract-name", "unix:/path" or
/// "tcp:host:port") as `rank` of `world_size`, presenting `secret`. Retries connecting until
/// `timeout`, since the server may start after the ranks, and then waits at most `timeout`
/// (plus a short grace for the server's own report) for each collective. A wrong secret, world
/// size or a rank that is taken is refused by the server with an iris::Error(kBootstrap) that
/// says which; no server within `timeout` is iris::Error(kTimeout). A program at `endpoint`
/// that is not an Iris rendezvous is named as such: iris::Error(kBootstrap) when it answers
/// something else, iris::Error(kTimeout) within `timeout` when it answers nothing. One server
/// serves any number of bootstraps: the n-th bootstrap a process opens at `endpoint` joins the
/// other ranks' n-th, so every rank must open them in the same order.
std::unique_ptr<Bootstrap> connect_bootstrap(const std::string& endpoint, int rank, int world_size,
                                             const std::string& secret,
                                             std::chrono::nanoseconds timeout);

/// Chooses the bootstrap from the environment, in this order:
///   1. iris-run: IRIS_BOOTSTRAP with IRIS_RANK, IRIS_WORLD_SIZE and IRIS_JOB_SECRET; the
///      launcher serves the rendezvous.
///   2. torchrun (RANK, WORLD_SIZE), Open MPI (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE) or
///      PMI (PMI_RANK, PMI_SIZE): rank 0 serves a TCP rendezvous and every rank (rank 0 too)
///      connects to it. Its endpoint is IRIS_BOOTSTRAP when set (e.g. tcp:node0:29600), else
///      tcp:MASTER_ADDR:IRIS_BOOTSTRAP_PORT, with MASTER_ADDR defaulting to 127.0.0.1 and the
///      port to MASTER_PORT + 1 (next to torchrun's store) or 29600. The job secret is
///      IRIS_JOB_SECRET when set, else derived from everything that tells jobs apart: the
///      launcher's job id (TORCHELASTIC_RUN_ID unless it is torchrun's default "none",
///      OMPI_MCA_ess_base_jobid, PMIX_NAMESPACE, SLURM_JOB_ID), MASTER_ADDR and MASTER_PORT
///      (two jobs running at once cannot share torchrun's store), the world size and
///      TORCHELASTIC_RESTART_COUNT. A rank of another job is then refused ("wrong job
///      secret"); when none of these is set a warning says that jobs cannot be told apart. A
///      derived secret only keeps another job from joining by accident; set IRIS_JOB_SECRET
///      (the same on every rank) where other users share the network.
///   3. Otherwise a single rank (make_single_rank_bootstrap()).
/// Every wait is bounded by IRIS_BOOTSTRAP_TIMEOUT (seconds, default 120). Rank 0 starts its
/// server on its first call and keeps it until the process exits, since the other ranks may
/// open their next bootstrap before rank 0 has closed its previous one. Each call opens a new
/// bootstrap (a job may hold several Contexts); the ranks' n-th calls are matched, so every
/// rank must make its calls in the same order. Checks the environment first
/// (env::check_environment()): throws iris::Error(kInvalidArgument) naming the variable when
/// one is malformed, or when a rank is set without its world size (or IRIS_RANK without
/// IRIS_BOOTSTRAP), rather than running as a single rank.
std::unique_ptr<Bootstrap> bootstrap_from_env();

/// Collective. The ranks that run on the same operating-system instance as this one (the same
/// kernel boot and network namespace, i.e. the ranks it can pass file descriptors to over Unix
/// sockets), in rank order and including this rank. The local rank is this rank's index in it.
std::vector<int> ranks_on_this_host(Bootstrap& bootstrap);

}  // namespace iris
