#include "detail/driver.hpp"

#include <cuda_runtime_api.h>

#include <string>

#include "iris/host/error.hpp"

namespace iris::detail {
namespace {

// The driver ABI version whose signatures cuda.h declares for these functions.
constexpr unsigned kDriverApiVersion = 12000;

template <class Fn>
void load(Fn& slot, const char* symbol) {
  void* address = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t status = cudaGetDriverEntryPointByVersion(symbol, &address, kDriverApiVersion,
                                                              cudaEnableDefault, &found);
  if (status != cudaSuccess || found != cudaDriverEntryPointSuccess || address == nullptr) {
    (void)cudaGetLastError();
    throw Error(Errc::kCuda,
                std::string("cannot load the CUDA driver function ") + symbol +
                    (status != cudaSuccess ? std::string(": ") + cudaGetErrorString(status)
                                           : std::string(": not provided by this driver")),
                static_cast<int>(status));
  }
  slot = reinterpret_cast<Fn>(address);
}

Driver load_driver() {
  Driver d{};
  load(d.device_get, "cuDeviceGet");
  load(d.device_get_attribute, "cuDeviceGetAttribute");
  load(d.mem_get_allocation_granularity, "cuMemGetAllocationGranularity");
  load(d.mem_create, "cuMemCreate");
  load(d.mem_release, "cuMemRelease");
  load(d.mem_export_to_shareable_handle, "cuMemExportToShareableHandle");
  load(d.mem_import_from_shareable_handle, "cuMemImportFromShareableHandle");
  load(d.mem_address_reserve, "cuMemAddressReserve");
  load(d.mem_address_free, "cuMemAddressFree");
  load(d.mem_map, "cuMemMap");
  load(d.mem_unmap, "cuMemUnmap");
  load(d.mem_set_access, "cuMemSetAccess");
  load(d.get_error_string, "cuGetErrorString");
  return d;
}

}  // namespace

const Driver& driver() {
  static const Driver table = load_driver();
  return table;
}

void throw_driver_error(CUresult result, const char* expression, std::source_location where) {
  const char* text = nullptr;
  if (driver().get_error_string(result, &text) != CUDA_SUCCESS || text == nullptr)
    text = "unknown error";
  throw Error(Errc::kCuda, std::string(expression) + " failed: " + text, static_cast<int>(result),
              where);
}

}  // namespace iris::detail
