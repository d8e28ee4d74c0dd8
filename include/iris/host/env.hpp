// Every environment variable Iris reads, in one place.
//
// | variable                 | meaning                                                    | default  |
// |--------------------------|------------------------------------------------------------|----------|
// | IRIS_LOG_LEVEL           | error, warn, info, debug or trace                          | warn     |
// | IRIS_HEAP_SIZE           | symmetric heap bytes per rank: 1073741824, 512MiB, 2GiB     | 1GiB     |
// | IRIS_HEAP_TRANSPORT      | how peers' heaps are mapped: auto, vmm or ipc              | auto     |
// | IRIS_DEBUG_CHECKS        | 1: every rank checks that all made the same allocations    | 0        |
// | IRIS_DEVICE              | CUDA device ordinal for this rank                          | local rank mod device count |
// | IRIS_WAIT_TIMEOUT        | seconds a bounded device wait spins before reporting; 0 = never | 60  |
// | IRIS_BOOTSTRAP_TIMEOUT   | seconds a rendezvous step waits for the other ranks        | 120      |
// | IRIS_BOOTSTRAP           | rendezvous endpoint, unix:@name or tcp:host:port (set by iris-run) | - |
// | IRIS_JOB_SECRET          | per-job secret that every rank must present (set by iris-run) | -     |
// | IRIS_BOOTSTRAP_PORT      | TCP port of rank 0's rendezvous under torchrun/mpirun       | MASTER_PORT+1 or 29600 |
// | IRIS_RANK, IRIS_WORLD_SIZE, IRIS_LOCAL_RANK, IRIS_LOCAL_WORLD_SIZE | set by iris-run   | -        |
//
// Under other launchers the rank is read from RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE
// (torchrun), OMPI_COMM_WORLD_* (Open MPI) or PMI_RANK/PMI_SIZE (MPICH, Slurm).
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace iris::env {

inline constexpr const char* kLogLevel = "IRIS_LOG_LEVEL";
inline constexpr const char* kHeapSize = "IRIS_HEAP_SIZE";
inline constexpr const char* kHeapTransport = "IRIS_HEAP_TRANSPORT";
inline constexpr const char* kDebugChecks = "IRIS_DEBUG_CHECKS";
inline constexpr const char* kDevice = "IRIS_DEVICE";
inline constexpr const char* kWaitTimeout = "IRIS_WAIT_TIMEOUT";
inline constexpr const char* kBootstrapTimeout = "IRIS_BOOTSTRAP_TIMEOUT";
inline constexpr const char* kBootstrap = "IRIS_BOOTSTRAP";
inline constexpr const char* kJobSecret = "IRIS_JOB_SECRET";
inline constexpr const char* kBootstrapPort = "IRIS_BOOTSTRAP_PORT";
inline constexpr const char* kRank = "IRIS_RANK";
inline constexpr const char* kWorldSize = "IRIS_WORLD_SIZE";
inline constexpr const char* kLocalRank = "IRIS_LOCAL_RANK";
inline constexpr const char* kLocalWorldSize = "IRIS_LOCAL_WORLD_SIZE";

/// The variable's value, or nothing when it is unset or empty.
std::optional<std::string> get(const char* name);

/// Parses a byte count: a plain integer or one with a suffix K, M, G, T (powers of 1024, with an
/// optional "iB" or "B"). Throws iris::Error(kInvalidArgument) naming `what` on anything else.
std::size_t parse_size(std::string_view text, std::string_view what);

/// Parses a whole number, throwing iris::Error(kInvalidArgument) naming `what` on bad input.
long long parse_int(std::string_view text, std::string_view what);

/// Parses seconds ("30", "0.5") into a duration; throws on bad input.
std::chrono::nanoseconds parse_seconds(std::string_view text, std::string_view what);

/// Parses 0/1/true/false/yes/no/on/off; throws on anything else.
bool parse_flag(std::string_view text, std::string_view what);

/// Typed getters: the parsed value, or `fallback` when the variable is unset.
std::size_t get_size(const char* name, std::size_t fallback);
long long get_int(const char* name, long long fallback);
std::chrono::nanoseconds get_seconds(const char* name, std::chrono::nanoseconds fallback);
bool get_flag(const char* name, bool fallback);

}  // namespace iris::env
