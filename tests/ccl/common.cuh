// Shared by the iris::ccl multi-rank tests: one Context and the communicators per process, data
// built so that every reduction is exact, and host-side expected values.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "iris/ccl.hpp"
#include "mp/common.cuh"

namespace ccl_test {

using iris::ccl::Algorithm;
using iris::ccl::Collective;
using iris::ccl::DataType;
using iris::ccl::ReduceOp;

/// The world's communicator, made once (construction is collective over the world).
inline iris::ccl::Communicator& world() {
  static iris::ccl::Communicator comm(iris_test::context());
  return comm;
}

/// With 4 or more ranks (even): the team of this rank's parity (stride 2, half the world),
/// else null. Made once, by every rank.
inline iris::ccl::Communicator* halves() {
  static std::unique_ptr<iris::ccl::Communicator> comm = [] {
    iris::Context& ctx = iris_test::context();
    const int n = ctx.world_size();
    if (n < 4 || n % 2 != 0) return std::unique_ptr<iris::ccl::Communicator>();
    return std::make_unique<iris::ccl::Communicator>(
        ctx, iris::team{.start = ctx.rank() % 2, .size = n / 2, .stride = 2});
  }();
  return comm.get();
}

/// Element i of world rank r's input for operator `op`: small integers (sum, avg, min, max) or
/// +-1, 2, 0.5 (prod), so that every order of summation gives the same exact value in every
/// type, fp16 and bf16 included.
inline double pattern(ReduceOp op, int r, std::size_t i) {
  if (op == ReduceOp::kProd) {
    const double kValues[] = {1.0, -1.0, 2.0, 0.5};
    return kValues[(i + 3 * static_cast<std::size_t>(r)) % 4];
  }
  return static_cast<double>(
      static_cast<long long>((i * 7 + static_cast<std::size_t>(r) * 13) % 31) - 15);
}

template <class T>
T make(ReduceOp op, int r, std::size_t i) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(static_cast<float>(pattern(op, r, i)));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(static_cast<float>(pattern(op, r, i)));
  } else if constexpr (std::is_same_v<T, float>) {
    return static_cast<float>(pattern(op, r, i));
  } else if constexpr (std::is_same_v<T, std::uint8_t>) {
    return static_cast<std::uint8_t>((i * 7 + static_cast<std::size_t>(r) * 13) % 251);
  } else if constexpr (std::is_same_v<T, std::int64_t>) {
    return static_cast<std::int64_t>(pattern(op, r, i)) +
           (op == ReduceOp::kProd ? 0 : (static_cast<std::int64_t>(r) << 33));
  } else {
    return static_cast<T>(pattern(op, r, i));
  }
}

/// op over `ranks` (world ranks, team order) of make<T>(op, r, i), computed on the host the
/// straightforward way (doubles for the floating types: exact for these inputs).
template <class T>
T expected(ReduceOp op, const std::vector<int>& ranks, std::size_t i) {
  const int n = static_cast<int>(ranks.size());
  if constexpr (std::is_integral_v<T>) {
    std::int64_t acc = static_cast<std::int64_t>(make<T>(op, ranks[0], i));
    for (int k = 1; k < n; ++k) {
      const auto v = static_cast<std::int64_t>(make<T>(op, ranks[k], i));
      switch (op) {
        case ReduceOp::kSum:
        case ReduceOp::kAvg:
          acc = static_cast<std::int64_t>(static_cast<std::uint64_t>(acc) +
                                          static_cast<std::uint64_t>(v));
          break;
        case ReduceOp::kProd:
          acc = static_cast<std::int64_t>(static_cast<std::uint64_t>(acc) *
                                          static_cast<std::uint64_t>(v));
          break;
        case ReduceOp::kMin:
          acc = std::min(acc, v);
          break;
        case ReduceOp::kMax:
          acc = std::max(acc, v);
          break;
      }
    }
    if (op == ReduceOp::kAvg) acc /= n;
    return static_cast<T>(static_cast<std::uint64_t>(acc));
  } else {
    auto to_double = [](T v) {
      if constexpr (std::is_same_v<T, __half>)
        return static_cast<double>(__half2float(v));
      else if constexpr (std::is_same_v<T, __nv_bfloat16>)
        return static_cast<double>(__bfloat162float(v));
      else
        return static_cast<double>(v);
    };
    double acc = to_double(make<T>(op, ranks[0], i));
    for (int k = 1; k < n; ++k) {
      const double v = to_double(make<T>(op, ranks[k], i));
      switch (op) {
        case ReduceOp::kSum:
        case ReduceOp::kAvg:
          acc += v;
          break;
        case ReduceOp::kProd:
          acc *= v;
          break;
        case ReduceOp::kMin:
          acc = std::min(acc, v);
          break;
        case ReduceOp::kMax:
          acc = std::max(acc, v);
          break;
      }
    }
    if (op == ReduceOp::kAvg) acc /= n;
    if constexpr (std::is_same_v<T, __half>)
      return __float2half_rn(static_cast<float>(acc));
    else if constexpr (std::is_same_v<T, __nv_bfloat16>)
      return __float2bfloat16_rn(static_cast<float>(acc));
    else
      return static_cast<T>(acc);
  }
}

template <class T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

/// World ranks of the communicator's members, in team order.
inline std::vector<int> members(const iris::ccl::Communicator& comm) {
  std::vector<int> out;
  for (int k = 0; k < comm.size(); ++k) out.push_back(comm.team().world_rank(k));
  return out;
}

inline std::vector<std::byte> download(const void* device, std::size_t bytes) {
  std::vector<std::byte> host(bytes);
  if (bytes) {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(host.data(), device, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  }
  return host;
}

inline void upload(void* device, const void* host, std::size_t bytes) {
  ASSERT_EQ(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), cudaSuccess);
}

constexpr unsigned char kPoison = 0xA7;

inline void poison(void* device, std::size_t bytes) {
  ASSERT_EQ(cudaMemset(device, kPoison, bytes), cudaSuccess);
}

/// Every type the reductions take, as a value of it.
template <class F>
void for_each_type(F&& f) {
  f(float{});
  f(__half{});
  f(__nv_bfloat16{});
  f(std::int32_t{});
  f(std::int64_t{});
  f(std::uint8_t{});
}

inline const char* type_name(float) {
  return "float";
}
inline const char* type_name(__half) {
  return "half";
}
inline const char* type_name(__nv_bfloat16) {
  return "bfloat16";
}
inline const char* type_name(std::int32_t) {
  return "int32";
}
inline const char* type_name(std::int64_t) {
  return "int64";
}
inline const char* type_name(std::uint8_t) {
  return "uint8";
}

constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kAvg};

/// A kernel of one call: the tile all_gather of `count` elements with `algorithm`, on channel 0
/// at step 0 (launch one block).
template <class T>
__global__ void one_tile_all_gather(const __grid_constant__ iris::ccl::device::Communicator comm,
                                    T* dst, const T* src, std::size_t count, Algorithm algorithm) {
  namespace dev = iris::ccl::device;
  const std::uint64_t epoch = dev::begin(comm);
  dev::all_gather(iris::block{}, comm, {epoch, 0, 0}, dst, src, count, algorithm);
  dev::end(comm, epoch);
}

}  // namespace ccl_test
