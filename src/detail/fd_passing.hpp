// Passing file descriptors between the ranks of one host (SCM_RIGHTS over Unix sockets).
//
// This is how ranks share their CUDA VMM heap handles: cuMemExportToShareableHandle gives a
// POSIX fd, which only means something in another process once the kernel has duplicated it
// there. SCM_RIGHTS does that without ptrace rights, so it works in containers where
// pidfd_getfd() is blocked.
//
// How exchange_fds() protects the descriptors: each rank listens on an abstract Unix socket
// whose name carries a random nonce, and hands its fd only to a peer that presents a random
// token; both travel through the bootstrap only. The name alone is not enough, because any
// process in the network namespace can list abstract names (/proc/net/unix).
//
//   rank a                                   rank b
//   listen @iris-fd-<nonce a>                listen @iris-fd-<nonce b>
//   allgather {name, token, ...}  <------->  allgather
//   connect @iris-fd-<nonce b>, send {token b, a}   ---> checks token b, sends fd b
//   checks token a, sends fd a  <---   connect @iris-fd-<nonce a>, send {token a, b}
//   close the listener once every peer has fetched its fd and every fd has arrived
#pragma once

#include <chrono>
#include <vector>

#include "detail/socket.hpp"
#include "iris/host/bootstrap.hpp"

namespace iris::detail {

/// Collective over every rank of `bootstrap`; each rank passes the ranks of its own host
/// (`local_ranks`: sorted, without repeats, including the caller, e.g. from
/// ranks_on_this_host()). On return, element r of the result holds this process's duplicate of
/// rank r's `my_fd` for every other r in `local_ranks`, and is empty for every other r. The
/// exchange (after the bootstrap's allgather) takes at most `timeout`; a peer that does not take
/// part in time gives iris::Error(kTimeout) naming it. Ranks that disagree on their host's ranks
/// get iris::Error(kMismatch). Every descriptor it opened on the way is closed, including when
/// it throws; received descriptors are close-on-exec.
std::vector<UniqueFd> exchange_fds(Bootstrap& bootstrap, int my_fd,
                                   const std::vector<int>& local_ranks,
                                   std::chrono::nanoseconds timeout);

}  // namespace iris::detail
