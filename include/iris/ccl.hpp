// iris::ccl: collectives built on the device API, stream-ordered and CUDA-graph capturable.
//
//   iris/ccl/communicator.hpp  iris::ccl::Communicator: all_reduce, reduce_scatter, all_gather,
//                              all_to_all(v), broadcast, reduce, gather, scatter, send/recv,
//                              barrier on a team
//   iris/ccl/types.hpp         DataType, ReduceOp, Collective, Algorithm, Options
//   iris/ccl/tuning.hpp        the selection table (IRIS_CCL_TUNING, IRIS_CCL_ALGORITHM)
//   iris/ccl/device.hpp        tile collectives for user kernels (CUDA sources only)
// Link iris::ccl. docs/ccl.md explains every algorithm with a who-sends-what diagram.
#pragma once

#include "iris/ccl/communicator.hpp"
#include "iris/ccl/tuning.hpp"
#include "iris/ccl/types.hpp"

#if defined(__CUDACC__)
#include "iris/ccl/device.hpp"
#endif
