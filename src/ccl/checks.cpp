#include "ccl/checks.hpp"

#include <cstdio>
#include <limits>

#include "iris/ccl/detail/workspace.hpp"
#include "iris/host/error.hpp"

namespace iris::ccl::detail {

namespace {
[[noreturn]] void invalid(const std::string& message) {
  throw Error(Errc::kInvalidArgument, message);
}
std::string team_text(const iris::team& t) {
  return "{start " + std::to_string(t.start) + ", size " + std::to_string(t.size) + ", stride " +
         std::to_string(t.stride) + "}";
}
}  // namespace

std::string address(const void* ptr) {
  char text[32];
  std::snprintf(text, sizeof(text), "%p", ptr);
  return text;
}

void check_team(const iris::team& team, int world_size, int rank) {
  if (team.size < 1 || team.stride < 1 || team.start < 0)
    invalid("iris::ccl::Communicator: team " + team_text(team) +
            " needs start >= 0, size >= 1 and stride >= 1");
  if (!team.fits(world_size))
    invalid("iris::ccl::Communicator: team " + team_text(team) + " reaches past the world of " +
            std::to_string(world_size) + " ranks");
  if (!team.contains(rank))
    invalid("iris::ccl::Communicator: team " + team_text(team) + " does not contain this rank (" +
            std::to_string(rank) + "); every rank makes a communicator for the team it is in");
  if (team.size > kMaxRanks || world_size > kMaxRanks)
    invalid("iris::ccl::Communicator: teams and worlds of at most " + std::to_string(kMaxRanks) +
            " ranks are supported (team " + team_text(team) + ", world " +
            std::to_string(world_size) + ")");
}

std::size_t checked_product(std::size_t a, std::size_t b, const char* call) {
  if (b != 0 && a > std::numeric_limits<std::size_t>::max() / b)
    invalid(std::string("iris::ccl::") + call + ": " + std::to_string(a) + " x " +
            std::to_string(b) + " bytes overflows");
  return a * b;
}

std::size_t checked_bytes(std::size_t count, std::size_t element, const char* call) {
  if (element != 0 && count > std::numeric_limits<std::size_t>::max() / element)
    invalid(std::string("iris::ccl::") + call + ": count " + std::to_string(count) + " of " +
            std::to_string(element) + "-byte elements overflows");
  return count * element;
}

void check_on_heap(const HeapRange& heap, const void* ptr, std::size_t bytes, const char* call,
                   const char* name) {
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  if (ptr == nullptr) invalid(std::string("iris::ccl::") + call + ": `" + name + "` is null");
  if (p < heap.begin || p >= heap.end || bytes > heap.end - p)
    invalid(std::string("iris::ccl::") + call + ": `" + name + "` (" + address(ptr) + ", " +
            std::to_string(bytes) + " bytes) is not on the symmetric heap [" +
            address(reinterpret_cast<const void*>(heap.begin)) + ", " +
            address(reinterpret_cast<const void*>(heap.end)) +
            "); allocate it with iris::Context (zeros, empty, allocate_bytes, ...)");
}

void check_root(int root, int team_size, const char* call, const char* name) {
  if (root < 0 || root >= team_size)
    invalid(std::string("iris::ccl::") + call + ": " + name + " " + std::to_string(root) +
            " is not a member of the team (team indices 0.." + std::to_string(team_size - 1) + ")");
}

void check_aliasing(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes,
                    bool in_place_ok, const char* call, const char* a_name, const char* b_name,
                    const char* in_place_rule) {
  const auto pa = reinterpret_cast<std::uintptr_t>(a);
  const auto pb = reinterpret_cast<std::uintptr_t>(b);
  if (a_bytes == 0 || b_bytes == 0) return;
  const bool overlap = pa < pb + b_bytes && pb < pa + a_bytes;
  if (!overlap) return;
  if (in_place_ok && pa == pb) return;
  invalid(std::string("iris::ccl::") + call + ": `" + a_name + "` [" + address(a) + ", +" +
          std::to_string(a_bytes) + ") and `" + b_name + "` [" + address(b) + ", +" +
          std::to_string(b_bytes) + ") overlap in a way this call cannot take (" + in_place_rule +
          ")");
}

std::uint64_t stable_hash(std::string_view text, std::uint64_t seed) {
  std::uint64_t h = seed;
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

void check_setups_agree(const std::vector<CommunicatorSetup>& all, const iris::team& team,
                        int rank) {
  const CommunicatorSetup& mine = all.at(static_cast<std::size_t>(rank));
  const std::string here = " on world rank " + std::to_string(rank);
  for (int k = 0; k < team.size; ++k) {
    const int r = team.world_rank(k);
    const CommunicatorSetup& theirs = all.at(static_cast<std::size_t>(r));
    const std::string there = " on world rank " + std::to_string(r);
    const iris::team their_team{theirs.team_start, theirs.team_size, theirs.team_stride};
    if (theirs.team_start != mine.team_start || theirs.team_size != mine.team_size ||
        theirs.team_stride != mine.team_stride)
      invalid("iris::ccl::Communicator: the team is " + team_text(team) + here + " but " +
              team_text(their_team) + there +
              "; the members of a team make its communicator together, naming the same team");
    auto differ = [&](const char* what, std::uint64_t a, std::uint64_t b, const char* hint) {
      if (a != b)
        invalid(std::string("iris::ccl::Communicator: ") + what + " is " + std::to_string(a) +
                here + " but " + std::to_string(b) + there + " (team " + team_text(team) + "); " +
                hint);
    };
    constexpr const char* kSame = "every member must pass the same CommunicatorOptions";
    differ("CommunicatorOptions::threads", static_cast<std::uint64_t>(mine.threads),
           static_cast<std::uint64_t>(theirs.threads), kSame);
    differ("CommunicatorOptions::packet_bytes", mine.packet_bytes, theirs.packet_bytes, kSame);
    differ("CommunicatorOptions::staging_bytes", mine.staging_bytes, theirs.staging_bytes, kSame);
    differ("IRIS_CCL_MOVE_VECTORS (vectors in flight)",
           static_cast<std::uint64_t>(mine.move_in_flight),
           static_cast<std::uint64_t>(theirs.move_in_flight),
           "every member must see the same environment");
    if (mine.selection != theirs.selection)
      invalid(
          "iris::ccl::Communicator: the selection table (IRIS_CCL_TUNING) or the forced "
          "algorithms (IRIS_CCL_ALGORITHM)" +
          here + " differ from those" + there + " (team " + team_text(team) +
          "): every member must choose the same algorithms and grids, or the calls wait for "
          "each other in vain; give every rank the same file and the same variables");
  }
}

}  // namespace iris::ccl::detail
