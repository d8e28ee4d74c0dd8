// iris::Buffer<T>: an owning handle to a symmetric allocation.
//
// Made by iris::Context (empty, zeros, ones, full, arange, uniform, normal and their *_like
// forms). The same Buffer on every rank lives at the same heap offset, so a kernel that
// translates data() to rank r (iris::device::Context::translate) reaches rank r's copy.
// Destroying a Buffer returns its memory to the heap; like allocation, that must happen in the
// same order on every rank (IRIS_DEBUG_CHECKS=1 verifies it).
#pragma once

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace iris {

namespace detail {
class ContextState;
/// Returns the allocation at `offset` to the heap of `state` (collective, like the allocation).
void release_symmetric(ContextState& state, std::size_t offset) noexcept;
/// Copies `bytes` bytes between host and device memory, after all work queued on this rank's
/// device (any stream) has finished; returns when the copy is done.
void copy_to_host(ContextState& state, void* host, const void* device, std::size_t bytes);
void copy_from_host(ContextState& state, void* device, const void* host, std::size_t bytes);
/// Base of rank `rank`'s heap as this process sees it.
std::byte* heap_base_of(const ContextState& state, int rank);
std::size_t heap_offset_of(const ContextState& state, const void* ptr);
[[noreturn]] void throw_size_mismatch(const char* where, std::size_t given, std::size_t expected);
}  // namespace detail

/// The shape of a symmetric allocation: `rows` x `cols` elements, consecutive rows
/// `row_stride` elements apart (row_stride >= cols). A 1-D allocation of n elements is 1 x n.
struct Shape {
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::size_t row_stride = 0;

  constexpr Shape() = default;
  /// 1-D: n elements.
  constexpr Shape(std::size_t n)
      : rows(1), cols(n), row_stride(n) {}  // NOLINT: implicit on purpose
  /// 2-D, rows packed (row_stride == cols), or with an explicit row stride.
  constexpr Shape(std::size_t rows_, std::size_t cols_, std::size_t row_stride_ = 0)
      : rows(rows_), cols(cols_), row_stride(row_stride_ == 0 ? cols_ : row_stride_) {}

  /// Elements that hold data (rows * cols).
  constexpr std::size_t elements() const { return rows * cols; }
  /// Elements the allocation spans, padding included (rows * row_stride).
  constexpr std::size_t span() const { return rows * row_stride; }
  constexpr bool operator==(const Shape&) const = default;
};

template <class T>
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& other) noexcept { swap(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    Buffer(std::move(other)).swap(*this);
    return *this;
  }
  ~Buffer() { reset(); }

  /// This rank's copy (device memory).
  T* data() const noexcept { return data_; }
  /// Rank `rank`'s copy as this process sees it: usable by kernels and cudaMemcpy on this rank.
  T* on(int rank) const {
    return reinterpret_cast<T*>(detail::heap_base_of(*state_, rank) + offset());
  }
  const Shape& shape() const noexcept { return shape_; }
  std::size_t size() const noexcept { return shape_.elements(); }
  std::size_t rows() const noexcept { return shape_.rows; }
  std::size_t cols() const noexcept { return shape_.cols; }
  std::size_t row_stride() const noexcept { return shape_.row_stride; }
  std::size_t bytes() const noexcept { return shape_.span() * sizeof(T); }
  /// Offset from the start of the heap: the same on every rank.
  std::size_t offset() const { return detail::heap_offset_of(*state_, data_); }
  explicit operator bool() const noexcept { return data_ != nullptr; }

  /// This rank's elements, row by row without padding (rows * cols values). Waits first for all
  /// work queued on this rank's device, on any stream (it does not wait for other ranks).
  std::vector<T> to_host() const {
    std::vector<T> out(size());
    for (std::size_t r = 0; r < shape_.rows; ++r)
      detail::copy_to_host(*state_, out.data() + r * shape_.cols, data_ + r * shape_.row_stride,
                           shape_.cols * sizeof(T));
    return out;
  }
  /// Overwrites this rank's elements from `values` (rows * cols values, row by row), after all
  /// work queued on this rank's device has finished.
  void copy_from_host(const std::vector<T>& values) {
    if (values.size() != size())
      detail::throw_size_mismatch("Buffer::copy_from_host", values.size(), size());
    for (std::size_t r = 0; r < shape_.rows; ++r)
      detail::copy_from_host(*state_, data_ + r * shape_.row_stride,
                             values.data() + r * shape_.cols, shape_.cols * sizeof(T));
  }

  /// Returns the memory to the heap now (collective, as the allocation was).
  void reset() noexcept {
    if (data_ != nullptr) detail::release_symmetric(*state_, offset());
    data_ = nullptr;
    state_.reset();
    shape_ = Shape();
  }

  void swap(Buffer& other) noexcept {
    std::swap(state_, other.state_);
    std::swap(data_, other.data_);
    std::swap(shape_, other.shape_);
  }

  /// Made by iris::Context; not for applications.
  Buffer(std::shared_ptr<detail::ContextState> state, T* data, Shape shape)
      : state_(std::move(state)), data_(data), shape_(shape) {}

 private:
  std::shared_ptr<detail::ContextState> state_;
  T* data_ = nullptr;
  Shape shape_;
};

}  // namespace iris
