// Every environment variable Iris reads, in one place, with the values each accepts.
//
// clang-format off
// | variable                 | accepted values                                            | default  |
// |--------------------------|------------------------------------------------------------|----------|
// | IRIS_LOG_LEVEL           | error, warn, info, debug, trace (any case); else a warning | warn     |
// | IRIS_HEAP_SIZE           | bytes per rank, > 1 MiB: 1073741824, 512MiB, 2G, 4GiB      | 1GiB     |
// | IRIS_HEAP_TRANSPORT      | auto, vmm or ipc: how peers' heaps are mapped              | auto     |
// | IRIS_DEBUG_CHECKS        | 0/1, true/false, yes/no, on/off: check allocation order    | 0        |
// | IRIS_DEVICE              | CUDA device ordinal >= 0 (must exist)                      | local rank mod device count |
// | IRIS_WAIT_TIMEOUT        | seconds a device wait spins before reporting; 0 = never    | 60       |
// | IRIS_BOOTSTRAP_TIMEOUT   | seconds a rendezvous step waits for the others; > 0        | 120      |
// | IRIS_BOOTSTRAP           | unix:@name, unix:/path, tcp:host:port (set by iris-run)    | -        |
// | IRIS_JOB_SECRET          | any text; every rank must present the same (set by iris-run) | derived |
// | IRIS_BOOTSTRAP_PORT      | 1-65535: rank 0's rendezvous port under torchrun/mpirun    | MASTER_PORT+1 or 29600 |
// | IRIS_RANK, IRIS_WORLD_SIZE | set by iris-run, together with IRIS_BOOTSTRAP            | -        |
// | IRIS_LOCAL_RANK, IRIS_LOCAL_WORLD_SIZE | set by iris-run                              | -        |
// clang-format on
//
// Seconds are decimal numbers (30, 0.5, 1e3), at most 9.2e9; hex, "inf" and negative numbers
// are refused. Under other launchers the rank is read from RANK/WORLD_SIZE (torchrun),
// OMPI_COMM_WORLD_RANK/SIZE (Open MPI) or PMI_RANK/PMI_SIZE (MPICH, Slurm); each pair must be
// set together.
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

/// Checks every variable of the table above (and the launchers' rank variables) and throws
/// iris::Error(kInvalidArgument) naming the first bad one, its value and the accepted form: a
/// malformed or out-of-range value, a rank without its world size (or the other way round),
/// IRIS_RANK without IRIS_BOOTSTRAP. Warns about a bad IRIS_LOG_LEVEL (once per process).
/// Context::from_env, the Context constructor and bootstrap_from_env call it before anything
/// else, so a bad value is reported before any CUDA call or connection. Touches no CUDA.
void check_environment();

/// The variable's value, or nothing when it is unset or empty.
std::optional<std::string> get(const char* name);

/// Parses a byte count: a plain integer or one with a suffix K, M, G, T (powers of 1024, with an
/// optional "iB" or "B"). Throws iris::Error(kInvalidArgument) naming `what` on anything else.
std::size_t parse_size(std::string_view text, std::string_view what);

/// Parses a whole number, throwing iris::Error(kInvalidArgument) naming `what` on bad input.
long long parse_int(std::string_view text, std::string_view what);

/// Parses decimal seconds ("30", "0.5", "1e3") into a duration; throws on anything else, on
/// negative numbers and on more than 9.2e9 s (what 64-bit nanoseconds hold).
std::chrono::nanoseconds parse_seconds(std::string_view text, std::string_view what);

/// Parses 0/1/true/false/yes/no/on/off; throws on anything else.
bool parse_flag(std::string_view text, std::string_view what);

/// Typed getters: the parsed value, or `fallback` when the variable is unset.
std::size_t get_size(const char* name, std::size_t fallback);
long long get_int(const char* name, long long fallback);
std::chrono::nanoseconds get_seconds(const char* name, std::chrono::nanoseconds fallback);
bool get_flag(const char* name, bool fallback);

}  // namespace iris::env
