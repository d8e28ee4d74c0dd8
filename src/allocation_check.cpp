#include "detail/allocation_check.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "detail/format.hpp"
#include "iris/host/error.hpp"

namespace iris::detail {

namespace {

enum class Operation : std::uint8_t { kAllocate = 1, kFree = 2 };
enum class Outcome : std::uint8_t { kSucceeded = 1, kFailed = 2 };

// One call as it travels between ranks: fixed size, no padding, no pointers, so that its bytes
// mean the same on every rank.
struct CallRecord {
  std::uint64_t sequence;
  std::uint64_t bytes;      // allocate: as requested; free: the allocation's requested size
  std::uint64_t alignment;  // allocate: as requested; free: 0
  std::uint64_t offset;     // allocate: the result (0 if it failed); free: the argument
  std::uint32_t line;
  Operation operation;
  Outcome outcome;
  std::array<char, 50> file;  // the call site's file name without directories, truncated
};
static_assert(std::has_unique_object_representations_v<CallRecord>,
              "CallRecord must have no padding: its bytes are sent to other ranks");

// Past this many groups of ranks doing different things a message stops being readable: the
// remaining groups are only counted.
constexpr std::size_t kMaxGroupsShown = 8;

CallRecord make_record(std::uint64_t sequence, Operation operation, Outcome outcome,
                       std::size_t bytes, std::size_t alignment, std::size_t offset,
                       const std::source_location& where) {
  CallRecord record{};
  record.sequence = sequence;
  record.bytes = bytes;
  record.alignment = alignment;
  record.offset = offset;
  record.line = where.line();
  record.operation = operation;
  record.outcome = outcome;
  std::string_view file = where.file_name() != nullptr ? where.file_name() : "";
  if (const auto slash = file.rfind('/'); slash != std::string_view::npos)
    file.remove_prefix(slash + 1);
  file = file.substr(0, record.file.size() - 1);
  std::copy(file.begin(), file.end(), record.file.begin());
  return record;
}

// What ranks must agree on. The call site is left out: it only helps the reader.
bool same_call(const CallRecord& a, const CallRecord& b) {
  return a.sequence == b.sequence && a.operation == b.operation && a.outcome == b.outcome &&
         a.bytes == b.bytes && a.alignment == b.alignment && a.offset == b.offset;
}

bool same_call_and_site(const CallRecord& a, const CallRecord& b) {
  return same_call(a, b) && a.line == b.line && a.file == b.file;
}

// "rank 3" or "ranks 0-2, 4, 6-7".
std::string rank_list(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t last = i;
    while (last + 1 < ranks.size() && ranks[last + 1] == ranks[last] + 1) ++last;
    if (i > 0) text += ", ";
    text += std::to_string(ranks[i]);
    if (last > i) text += "-" + std::to_string(ranks[last]);
    i = last + 1;
  }
  return text;
}

struct Differences {
  bool sequence = false;
  bool offset_only = false;  // the requests agree, only the resulting offsets differ
};

std::string describe(const CallRecord& record, const Differences& differences) {
  std::string text;
  if (differences.sequence) text += "at call #" + std::to_string(record.sequence) + ": ";
  if (record.operation == Operation::kAllocate) {
    text += "allocate " + format_byte_count(record.bytes) + " with alignment " +
            std::to_string(record.alignment);
    if (record.outcome == Outcome::kFailed)
      text += ", which failed there,";
    else if (differences.offset_only)
      text += " (got offset " + std::to_string(record.offset) + ")";
  } else {
    text += "free offset " + std::to_string(record.offset);
    text += record.outcome == Outcome::kFailed
                ? " (not a live allocation there)"
                : " (an allocation of " + format_byte_count(record.bytes) + ")";
  }
  // Bounded read: a record comes from another process and is not trusted to end in a NUL.
  text += " at ";
  text += std::string_view(record.file.data(), strnlen(record.file.data(), record.file.size()));
  text += ":" + std::to_string(record.line);
  return text;
}

std::string mismatch_message(const std::vector<CallRecord>& records) {
  Differences differences;
  bool requests_differ = false;
  const CallRecord& first = records.front();
  for (const CallRecord& record : records) {
    differences.sequence |= record.sequence != first.sequence;
    // A free's offset is part of its request; an allocation's offset is its result.
    requests_differ |= record.operation != first.operation || record.outcome != first.outcome ||
                       record.bytes != first.bytes || record.alignment != first.alignment ||
                       (record.operation == Operation::kFree && record.offset != first.offset);
  }
  differences.offset_only = !requests_differ && !differences.sequence;

  // Ranks that did exactly the same thing at the same place share one line, in rank order.
  std::vector<std::vector<int>> groups;
  for (int rank = 0; rank < static_cast<int>(records.size()); ++rank) {
    const auto group = std::find_if(groups.begin(), groups.end(), [&](const auto& members) {
      return same_call_and_site(records[members.front()], records[rank]);
    });
    if (group != groups.end())
      group->push_back(rank);
    else
      groups.push_back({rank});
  }

  // Every rank builds the same message, so the headline uses no rank's own numbering unless
  // all agree on it.
  std::string message = differences.sequence
                            ? std::string("the ranks are at different symmetric heap calls: ")
                            : "symmetric heap call #" + std::to_string(first.sequence) +
                                  " (allocations and frees, counted from 1) differs between "
                                  "ranks: ";
  for (std::size_t i = 0; i < groups.size() && i < kMaxGroupsShown; ++i) {
    if (i > 0) message += "; ";
    message += rank_list(groups[i]) + " " + describe(records[groups[i].front()], differences);
  }
  if (groups.size() > kMaxGroupsShown)
    message += "; and " + std::to_string(groups.size() - kMaxGroupsShown) +
               " more groups of ranks that did something else";
  message += ".";
  if (differences.sequence)
    message +=
        " The ranks have checked different numbers of calls: the check must be on for "
        "every rank from the start (IRIS_DEBUG_CHECKS).";
  else if (differences.offset_only)
    message +=
        " The requests agree but the offsets do not, so the heaps had diverged before "
        "this call.";
  message +=
      " Every rank must make the same symmetric allocations and frees, with the same "
      "sizes, in the same order.";
  return message;
}

// Collective: every rank learns every rank's record and throws the same error if any differs.
void compare_with_peers(Bootstrap& bootstrap, const CallRecord& mine) {
  std::vector<CallRecord> records(static_cast<std::size_t>(bootstrap.world_size()));
  bootstrap.allgather(&mine, records.data(), sizeof(CallRecord));
  for (const CallRecord& record : records)
    if (!same_call(record, mine)) throw Error(Errc::kMismatch, mismatch_message(records));
}

}  // namespace

void AllocationCheck::verify_allocate(std::size_t bytes, std::size_t alignment,
                                      std::optional<std::size_t> offset,
                                      std::source_location where) {
  const std::uint64_t sequence = ++calls_checked_;
  const CallRecord mine =
      make_record(sequence, Operation::kAllocate, offset ? Outcome::kSucceeded : Outcome::kFailed,
                  bytes, alignment, offset.value_or(0), where);
  compare_with_peers(bootstrap_, mine);
}

void AllocationCheck::verify_free(std::size_t offset, std::optional<std::size_t> bytes,
                                  std::source_location where) {
  const std::uint64_t sequence = ++calls_checked_;
  const CallRecord mine =
      make_record(sequence, Operation::kFree, bytes ? Outcome::kSucceeded : Outcome::kFailed,
                  bytes.value_or(0), 0, offset, where);
  compare_with_peers(bootstrap_, mine);
}

std::size_t checked_allocate(HeapAllocator& allocator, AllocationCheck* check, std::size_t bytes,
                             std::size_t alignment, std::source_location where) {
  if (check == nullptr) return allocator.allocate(bytes, alignment);

  std::optional<std::size_t> offset;
  std::exception_ptr failure;
  try {
    offset = allocator.allocate(bytes, alignment);
  } catch (const Error&) {
    // Reported after the check: if the other ranks' calls differ, that is the real cause.
    failure = std::current_exception();
  }
  try {
    check->verify_allocate(bytes, alignment, offset, where);
  } catch (...) {
    if (offset) allocator.free(*offset);
    throw;
  }
  if (failure) std::rethrow_exception(failure);
  return *offset;
}

void checked_free(HeapAllocator& allocator, AllocationCheck* check, std::size_t offset,
                  std::source_location where) {
  if (check != nullptr) {
    const std::optional<std::size_t> bytes =
        allocator.is_live(offset) ? std::optional(allocator.size_of(offset)) : std::nullopt;
    check->verify_free(offset, bytes, where);
  }
  allocator.free(offset);
}

}  // namespace iris::detail
