// Tensor: shared storage + byte offset, a DType, a Device and a shape of rank
// <= 4, always contiguous row-major.
//
// There is no autograd graph: modules own their backward. Views along dim 0
// (narrow, chunk) and reshapes share storage; everything else copies.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "weft/core/device.h"
#include "weft/core/dtype.h"
#include "weft/core/error.h"
#include "weft/core/memory.h"

namespace weft {

class Shape {
 public:
  static constexpr int kMaxRank = 4;
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(std::span<const int64_t> dims);

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[static_cast<size_t>(i)]; }
  int64_t& operator[](int i) { return dims_[static_cast<size_t>(i)]; }
  int64_t numel() const;
  // Product of all dimensions but the last (rows of the 2-D view).
  int64_t rows() const;
  int64_t last() const { return rank_ ? dims_[static_cast<size_t>(rank_ - 1)] : 1; }
  std::string str() const;  // "[2, 3, 4]"
  friend bool operator==(const Shape& a, const Shape& b);

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

inline std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << s.str(); }

class Storage {
 public:
  Storage(int64_t bytes, Device device, MemoryTag tag);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  MemoryTag tag() const { return tag_; }

 private:
  void* data_ = nullptr;
  int64_t bytes_ = 0;
  Device device_;
  MemoryTag tag_;
  MemoryTracker* tracker_;
};

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::i32;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::u8;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::i64;
}

class Tensor {
 public:
  Tensor() = default;

  // Uninitialized storage.
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu(),
                      MemoryTag tag = current_memory_tag());
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu(),
                      MemoryTag tag = current_memory_tag());
  static Tensor full(const Shape& shape, float value, DType dtype = DType::f32);
  // Copies `values` (f32) into a new tensor of `dtype`, converting.
  static Tensor from(const Shape& shape, std::span<const float> values, DType dtype = DType::f32);
  static Tensor from_i32(const Shape& shape, std::span<const int32_t> values);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int dim() const { return shape_.rank(); }
  int64_t size(int d) const;
  int64_t numel() const { return shape_.numel(); }
  int64_t nbytes() const { return dtype_storage_bytes(dtype_, numel()); }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }

  // The first element's address, on the tensor's device (a device pointer
  // for a CUDA tensor: only kernels/cuda/ dereferences it).
  void* raw() const;
  // Host pointers to the elements; throw weft::Error for a tensor on a GPU.
  template <typename T>
  T* data() const {
    WEFT_CHECK(dtype_ == dtype_of<T>(), "tensor holds {}, not the requested element type",
               dtype_name(dtype_));
    check_host();
    return static_cast<T*>(raw());
  }
  // bf16 storage as raw 16-bit words.
  uint16_t* bf16_data() const;

  // Views sharing storage.
  Tensor narrow(int64_t start, int64_t length) const;  // along dim 0
  std::vector<Tensor> chunk(int64_t n) const;          // n equal pieces along dim 0
  Tensor reshape(const Shape& shape) const;
  // Rows [start, start+length) of the 2-D view (rows x last dim).
  Tensor rows(int64_t start, int64_t length) const;
  // `shape` elements of `dtype` starting `byte_offset` bytes into this
  // tensor's bytes, which must hold them: the parts of a packed byte buffer
  // (a quantized weight's data and scales gathered in one collective).
  Tensor view_as(DType dtype, const Shape& shape, int64_t byte_offset = 0) const;

  // Copies.
  Tensor clone(MemoryTag tag = current_memory_tag()) const;
  Tensor to(DType dtype) const;    // same tensor when the dtype already matches
  Tensor to(Device device) const;  // same tensor when already there; synchronous
  // Same number of elements; converts dtype; copies between devices. A copy
  // involving the host is complete when it returns (after the kernels queued
  // before it); one within a GPU is ordered with every weft stream without
  // blocking the host (the legacy default stream).
  void copy_from(const Tensor& src);
  void fill(float value);
  void zero();

  // Element access for tests and tools (converts through f32; copies a GPU
  // tensor to the host first).
  std::vector<float> to_vector() const;
  float item(int64_t flat_index) const;

  bool same_storage(const Tensor& other) const { return storage_ == other.storage_; }
  // Whether this handle is the only one referencing its storage (a buffer
  // nobody else holds may be overwritten).
  bool sole_owner() const { return storage_ && storage_.use_count() == 1; }

 private:
  void check_host() const;
  std::shared_ptr<Storage> storage_;
  int64_t offset_ = 0;  // bytes
  Shape shape_;
  DType dtype_ = DType::f32;
};

}  // namespace weft

template <>
struct fmt::formatter<weft::Shape> : weft::StrFormatter<weft::Shape> {};
