// The few CUDA driver functions the heap needs, reached through cudaGetDriverEntryPointByVersion
// so that nothing links libcuda: the runtime library then loads on machines without a driver
// (CI), and fails only when a heap is actually made.
#pragma once

#include <cuda.h>

#include <source_location>

namespace iris::detail {

struct Driver {
  decltype(&::cuDeviceGet) device_get;
  decltype(&::cuDeviceGetAttribute) device_get_attribute;
  decltype(&::cuMemGetAllocationGranularity) mem_get_allocation_granularity;
  decltype(&::cuMemCreate) mem_create;
  decltype(&::cuMemRelease) mem_release;
  decltype(&::cuMemExportToShareableHandle) mem_export_to_shareable_handle;
  decltype(&::cuMemImportFromShareableHandle) mem_import_from_shareable_handle;
  decltype(&::cuMemAddressReserve) mem_address_reserve;
  decltype(&::cuMemAddressFree) mem_address_free;
  decltype(&::cuMemMap) mem_map;
  decltype(&::cuMemUnmap) mem_unmap;
  decltype(&::cuMemSetAccess) mem_set_access;
  decltype(&::cuGetErrorString) get_error_string;
};

/// The driver table, loaded on first use. Throws iris::Error(kCuda) when the driver (or one of
/// the functions) is missing.
const Driver& driver();

/// Throws iris::Error(kCuda) naming `expression` and the driver's description of `result`.
[[noreturn]] void throw_driver_error(CUresult result, const char* expression,
                                     std::source_location where);

}  // namespace iris::detail

#define IRIS_CU_CHECK(expr)                                                  \
  do {                                                                       \
    const CUresult iris_cu_result_ = (expr);                                 \
    if (iris_cu_result_ != CUDA_SUCCESS)                                     \
      ::iris::detail::throw_driver_error(iris_cu_result_, #expr,             \
                                         ::std::source_location::current()); \
  } while (0)
