// The shape of an iris::ccl call (selection.hpp).
#include "ccl/selection.hpp"

#include <algorithm>
#include <string>

#include "iris/ccl/detail/workspace.hpp"
#include "iris/host/error.hpp"

namespace iris::ccl::detail {

namespace {

std::size_t ceil_div(std::size_t a, std::size_t b) {
  return (a + b - 1) / b;
}

}  // namespace

std::size_t Selector::message_capacity(Algorithm algorithm) const {
  if (algorithm == Algorithm::kOneShot) return packet_payload_capacity(packet_bytes, team_size);
  if (algorithm == Algorithm::kTwoShotPackets)
    return two_shot_payload_capacity(packet_bytes, team_size);
  if (algorithm == Algorithm::kOneShotPush) return push_payload_capacity(staging_bytes, team_size);
  return 0;
}

const char* Selector::unfit(Collective c, Algorithm algorithm, std::size_t bytes,
                            bool in_place) const {
  if (!collective_has(c, algorithm)) return "the collective has no such algorithm";
  if (c == Collective::kAllReduce) {
    if (in_packets(algorithm) && bytes > message_capacity(algorithm))
      return "the message is larger than the packet slots take (CommunicatorOptions::"
             "packet_bytes)";
    if (algorithm == Algorithm::kOneShotPush && bytes > message_capacity(algorithm))
      return "the message is larger than a sender's staging row (CommunicatorOptions::"
             "staging_bytes / 2 / team size)";
    if (algorithm == Algorithm::kOneShotPull && in_place)
      return "one_shot_pull cannot run in place (members read each other's input while "
             "writing their output)";
  }
  if (c == Collective::kReduceScatter && algorithm == Algorithm::kRing &&
      staging_bytes < kRingSlots * std::size_t{256})
    return "the communicator has too little staging for the ring's partial sums "
           "(CommunicatorOptions::staging_bytes must be at least 1024)";
  return nullptr;
}

Algorithm Selector::fallback(Collective c, std::size_t bytes, bool in_place) const {
  if (c == Collective::kAllReduce)
    return unfit(c, Algorithm::kOneShot, bytes, in_place) == nullptr &&
                   bytes <= kFallbackOneShotBytes
               ? Algorithm::kOneShot
               : Algorithm::kTwoShot;
  return Algorithm::kPull;
}

Plan Selector::plan(Collective c, std::size_t bytes, const Options& options, bool in_place,
                    const char* call) const {
  if (options.max_blocks < 0 || options.max_blocks > kMaxChannels)
    throw Error(Errc::kInvalidArgument, std::string("iris::ccl::") + call +
                                            ": Options::max_blocks " +
                                            std::to_string(options.max_blocks) + " is outside 0.." +
                                            std::to_string(kMaxChannels));
  if (options.max_blocks > limit(c))
    throw Error(Errc::kInvalidArgument,
                std::string("iris::ccl::") + call + ": Options::max_blocks " +
                    std::to_string(options.max_blocks) + " is more than the " +
                    std::to_string(limit(c)) +
                    " blocks of this call's kernel that every member can keep resident at once "
                    "(Communicator::block_limit): the blocks wait for each other's, so a larger "
                    "grid can hang; ask for at most " +
                    std::to_string(limit(c)));
  Plan plan;
  int blocks = options.max_blocks;
  plan.chunk = options.chunk_bytes;
  const Algorithm forced =
      options.algorithm != Algorithm::kAuto ? options.algorithm : this->forced[static_cast<int>(c)];
  if (forced != Algorithm::kAuto) {
    if (const char* why = unfit(c, forced, bytes, in_place))
      throw Error(Errc::kInvalidArgument,
                  std::string("iris::ccl::") + call + ": algorithm " +
                      std::string(to_string(forced)) + " (forced by " +
                      (options.algorithm != Algorithm::kAuto ? "Options::algorithm"
                                                             : std::string(kAlgorithmEnv)) +
                      ") cannot run this call: " + why);
    plan.algorithm = forced;
  } else {
    for (const TuningEntry& e : table.entries()) {
      if (!e.matches(c, team_size, bytes) || unfit(c, e.algorithm, bytes, in_place) != nullptr)
        continue;
      plan.algorithm = e.algorithm;
      // A table measured with more blocks (another GPU, or a budget of its own) stays within
      // this communicator's SM budget: only the call's own Options may go above it.
      if (blocks == 0 && e.max_blocks > 0) blocks = std::min(e.max_blocks, budget(c));
      if (plan.chunk == 0) plan.chunk = e.chunk_bytes;
      break;
    }
    if (plan.algorithm == Algorithm::kAuto) plan.algorithm = fallback(c, bytes, in_place);
  }
  if (blocks <= 0) blocks = budget(c);
  if (plan.chunk == 0)
    plan.chunk = in_packets(plan.algorithm) || plan.algorithm == Algorithm::kOneShotPush
                     ? kDefaultOneShotChunkBytes
                     : kDefaultChunkBytes;
  plan.blocks = static_cast<int>(std::clamp<std::size_t>(ceil_div(bytes, plan.chunk), 1, blocks));
  return plan;
}

}  // namespace iris::ccl::detail
