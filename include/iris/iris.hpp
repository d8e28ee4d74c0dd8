// Iris for CUDA C++: everything an application includes.
//
//   host:   iris::Context (bootstrap, symmetric heap, allocation), iris::Buffer, iris::Error
//   device: iris::device::Context and the device API under iris/device/
#pragma once

#include "iris/host/bootstrap.hpp"
#include "iris/host/buffer.hpp"
#include "iris/host/context.hpp"
#include "iris/host/env.hpp"
#include "iris/host/error.hpp"

#if defined(__CUDACC__)
#include "iris/device.hpp"
#endif
