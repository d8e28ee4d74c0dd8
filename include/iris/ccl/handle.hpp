// iris::ccl::device::Communicator: the plain-data handle kernels receive (by value) from
// iris::ccl::Communicator::device(), as iris::device::Context comes from iris::Context.
#pragma once

#include <cstddef>
#include <cstdint>

#include "iris/device/barrier.hpp"
#include "iris/device/context.hpp"
#include "iris/device/team.hpp"

namespace iris::ccl::device {

struct Communicator {
  iris::device::Context ctx;       ///< the rank's device context
  iris::team team;                 ///< who takes part
  int index = 0;                   ///< this rank's index in the team
  std::byte* workspace = nullptr;  ///< this rank's copy of the communicator's workspace
  std::size_t packet_bytes = 0;    ///< bytes of packet slots after the control block
  /// The communicator's barrier object: one channel per block of the largest grid ccl launches
  /// (block c of every member meets on channel c; iris/ccl/detail/sync.hpp).
  iris::device::Barriers barriers;

  /// World rank of team member `member`.
  IRIS_HOST_DEVICE int world_rank(int member) const { return team.world_rank(member); }
  IRIS_HOST_DEVICE int size() const { return team.size; }
};

}  // namespace iris::ccl::device
