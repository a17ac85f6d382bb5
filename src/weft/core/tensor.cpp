#include "weft/core/tensor.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "weft/core/cuda.h"

namespace weft {

Shape::Shape(std::initializer_list<int64_t> dims) : Shape(std::span(dims.begin(), dims.size())) {}

Shape::Shape(std::span<const int64_t> dims) {
  WEFT_CHECK(dims.size() <= kMaxRank, "tensors have at most {} dimensions, got {}", kMaxRank,
             dims.size());
  rank_ = static_cast<int>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    WEFT_CHECK(dims[i] >= 0, "negative dimension {} in a shape", dims[i]);
    dims_[i] = dims[i];
  }
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[static_cast<size_t>(i)];
  return n;
}

int64_t Shape::rows() const { return last() == 0 ? 0 : numel() / last(); }

std::string Shape::str() const {
  std::ostringstream out;
  out << '[';
  for (int i = 0; i < rank_; ++i) out << (i ? ", " : "") << dims_[static_cast<size_t>(i)];
  out << ']';
  return out.str();
}

bool operator==(const Shape& a, const Shape& b) {
  if (a.rank_ != b.rank_) return false;
  for (int i = 0; i < a.rank_; ++i)
    if (a[i] != b[i]) return false;
  return true;
}

Storage::Storage(int64_t bytes, Device device, MemoryTag tag)
    : bytes_(bytes), device_(device), tag_(tag), tracker_(&MemoryTracker::current()) {
  data_ = allocate_bytes(device, bytes, tag, *tracker_);
}

Storage::~Storage() { free_bytes(data_, device_, bytes_, tag_, *tracker_); }

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device, MemoryTag tag) {
  Tensor t;
  t.storage_ = std::make_shared<Storage>(dtype_storage_bytes(dtype, shape.numel()), device, tag);
  t.shape_ = shape;
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device, MemoryTag tag) {
  Tensor t = empty(shape, dtype, device, tag);
  t.zero();
  return t;
}

Tensor Tensor::full(const Shape& shape, float value, DType dtype) {
  Tensor t = empty(shape, dtype);
  t.fill(value);
  return t;
}

Tensor Tensor::from(const Shape& shape, std::span<const float> values, DType dtype) {
  WEFT_CHECK(static_cast<int64_t>(values.size()) == shape.numel(),
             "{} values given for a tensor of shape {} ({} elements)", values.size(), shape,
             shape.numel());
  Tensor t = empty(shape, dtype);
  convert(values.data(), DType::f32, t.raw(), dtype, shape.numel());
  return t;
}

Tensor Tensor::from_i32(const Shape& shape, std::span<const int32_t> values) {
  WEFT_CHECK(static_cast<int64_t>(values.size()) == shape.numel(),
             "{} values given for a tensor of shape {} ({} elements)", values.size(), shape,
             shape.numel());
  Tensor t = empty(shape, DType::i32);
  if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * sizeof(int32_t));
  return t;
}

int64_t Tensor::size(int d) const {
  if (d < 0) d += dim();
  WEFT_CHECK(d >= 0 && d < dim(), "dimension {} out of range for a tensor of shape {}", d, shape_);
  return shape_[d];
}

void* Tensor::raw() const {
  WEFT_CHECK(storage_, "use of an undefined tensor");
  return static_cast<char*>(storage_->data()) + offset_;
}

void Tensor::check_host() const {
  WEFT_CHECK(device().is_cpu(),
             "a tensor on {} is not addressable from the host: copy it first (to(Device::cpu())), "
             "or pass it to a kernel with a context on its device",
             device());
}

uint16_t* Tensor::bf16_data() const {
  WEFT_CHECK(dtype_ == DType::bf16, "tensor holds {}, not bf16", dtype_name(dtype_));
  check_host();
  return static_cast<uint16_t*>(raw());
}

Tensor Tensor::narrow(int64_t start, int64_t length) const {
  WEFT_CHECK(dim() >= 1, "narrow needs at least one dimension");
  WEFT_CHECK(start >= 0 && length >= 0 && start + length <= shape_[0],
             "narrow [{}, {}) is outside dimension 0 of size {}", start, start + length, shape_[0]);
  int64_t row = numel() / std::max<int64_t>(shape_[0], 1);
  WEFT_CHECK(dtype_bits(dtype_) % 8 == 0 || (start * row) % 2 == 0,
             "narrow of a packed fp4 tensor must start on a whole byte");
  Tensor t = *this;
  t.offset_ += dtype_storage_bytes(dtype_, start * row);
  t.shape_[0] = length;
  return t;
}

std::vector<Tensor> Tensor::chunk(int64_t n) const {
  WEFT_CHECK(n >= 1 && dim() >= 1 && shape_[0] % n == 0,
             "cannot split dimension 0 of size {} into {} equal chunks", dim() ? shape_[0] : 0, n);
  std::vector<Tensor> out;
  int64_t len = shape_[0] / n;
  for (int64_t i = 0; i < n; ++i) out.push_back(narrow(i * len, len));
  return out;
}

Tensor Tensor::reshape(const Shape& shape) const {
  WEFT_CHECK(shape.numel() == numel(), "cannot reshape {} ({} elements) to {} ({} elements)",
             shape_, numel(), shape, shape.numel());
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::rows(int64_t start, int64_t length) const {
  return reshape({shape_.rows(), shape_.last()}).narrow(start, length);
}

Tensor Tensor::view_as(DType dtype, const Shape& shape, int64_t byte_offset) const {
  const int64_t bytes = dtype_storage_bytes(dtype, shape.numel());
  WEFT_CHECK(byte_offset >= 0 && byte_offset + bytes <= nbytes(),
             "a view of {} {} at byte {} needs {} bytes; the tensor holds {}", shape,
             dtype_name(dtype), byte_offset, bytes, nbytes());
  Tensor t = *this;
  t.offset_ += byte_offset;
  t.shape_ = shape;
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::clone(MemoryTag tag) const {
  Tensor t = empty(shape_, dtype_, device(), tag);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return *this;
  Tensor t = empty(shape_, dtype, device());
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to(Device device) const {
  if (device == this->device()) return *this;
  Tensor t = empty(shape_, dtype_, device, storage_ ? storage_->tag() : current_memory_tag());
  t.copy_from(*this);
  return t;
}

void Tensor::copy_from(const Tensor& src) {
  WEFT_CHECK(src.numel() == numel(), "copy of {} elements into a tensor of {} ({} vs {})",
             src.numel(), numel(), src.shape(), shape_);
  if (numel() == 0) return;
  if (device().is_cpu() && src.device().is_cpu()) {
    if (src.dtype_ == dtype_) {
      std::memmove(raw(), src.raw(), static_cast<size_t>(nbytes()));
    } else {
      convert(src.raw(), src.dtype_, raw(), dtype_, numel());
    }
    return;
  }
  if (src.dtype_ == dtype_) {
    cuda::copy_bytes(raw(), device(), src.raw(), src.device(), static_cast<size_t>(nbytes()));
    return;
  }
  if (device() == src.device() &&
      cuda::convert_on_device(src.raw(), src.dtype_, raw(), dtype_, numel(), device())) {
    return;
  }
  // Other conversions involving a GPU go through the host (tools and tests).
  const Tensor host_src = src.to(Device::cpu());
  Tensor host_dst = empty(shape_, dtype_, Device::cpu());
  host_dst.copy_from(host_src);
  copy_from(host_dst);
}

void Tensor::fill(float value) {
  if (device().is_cuda()) {
    Tensor host = empty(shape_, dtype_, Device::cpu());
    host.fill(value);
    copy_from(host);
    return;
  }
  int64_t n = numel();
  if (dtype_ == DType::f32) {
    std::fill_n(data<float>(), n, value);
  } else if (dtype_ == DType::bf16) {
    std::fill_n(bf16_data(), n, f32_to_bf16(value));
  } else {
    std::vector<float> v(static_cast<size_t>(n), value);
    convert(v.data(), DType::f32, raw(), dtype_, n);
  }
}

void Tensor::zero() {
  if (nbytes() == 0) return;  // empty: no storage
  if (device().is_cuda()) {
    cuda::zero_bytes(raw(), device(), static_cast<size_t>(nbytes()));
  } else {
    std::memset(raw(), 0, static_cast<size_t>(nbytes()));
  }
}

std::vector<float> Tensor::to_vector() const {
  if (device().is_cuda()) return to(Device::cpu()).to_vector();
  std::vector<float> out(static_cast<size_t>(numel()));
  convert(raw(), dtype_, out.data(), DType::f32, numel());
  return out;
}

float Tensor::item(int64_t i) const {
  WEFT_CHECK(i >= 0 && i < numel(), "index {} out of range for {} elements", i, numel());
  if (device().is_cuda()) {
    // One element (a whole byte for packed fp4) brought to the host.
    const int64_t first = dtype_ == DType::e2m1 ? i / 2 * 2 : i;
    const int64_t count = dtype_ == DType::e2m1 ? std::min<int64_t>(2, numel() - first) : 1;
    return reshape({numel()}).narrow(first, count).to(Device::cpu()).item(i - first);
  }
  float v;
  if (dtype_ == DType::e2m1) {
    uint8_t byte = static_cast<const uint8_t*>(raw())[i / 2];
    return e2m1_to_f32(i % 2 ? byte >> 4 : byte & 0xf);
  }
  convert(static_cast<const char*>(raw()) + dtype_storage_bytes(dtype_, i), dtype_, &v, DType::f32,
          1);
  return v;
}

}  // namespace weft
