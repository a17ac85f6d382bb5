#include "weft/core/exec_context.h"

#include "weft/core/cuda.h"
#include "weft/core/threads.h"

namespace weft {

const ExecContext& ExecContext::host() {
  static const ExecContext context;
  return context;
}

ExecContext ExecContext::cuda(int index) {
  ExecContext context(Device::cuda(index), 0);
  context.stream_ = cuda::new_stream(index);
  return context;
}

ExecContext ExecContext::on(Device device) { return device.is_cpu() ? host() : cuda(device.index); }

void ExecContext::synchronize() const {
  if (device_.is_cuda()) cuda::synchronize(stream(), device_.index);
}

int ExecContext::threads() const { return threads_ > 0 ? threads_ : num_threads(); }

Tensor ExecContext::empty(const Shape& shape, DType dtype, MemoryTag tag) const {
  const cuda::ScopedAllocationStream on_stream(stream());
  return Tensor::empty(shape, dtype, device_, tag);
}

Tensor ExecContext::zeros(const Shape& shape, DType dtype, MemoryTag tag) const {
  Tensor t = empty(shape, dtype, tag);
  t.zero();
  return t;
}

Tensor ExecContext::upload(const Tensor& t, MemoryTag tag) const {
  if (t.device() == device_) return t;
  if (!t.device().is_cpu() || !device_.is_cuda()) return t.to(device_);
  Tensor out = empty(t.shape(), t.dtype(), tag);
  cuda::upload_bytes(out.raw(), device_, t.raw(), static_cast<size_t>(t.nbytes()), stream());
  return out;
}

Tensor ExecContext::reuse(Tensor& slot, const Shape& shape, DType dtype, MemoryTag tag) const {
  const int64_t n = shape.numel();
  if (!slot.defined() || !slot.sole_owner() || slot.dtype() != dtype ||
      !(slot.device() == device_) || slot.numel() < n) {
    slot = empty({n}, dtype, tag);  // on this context's stream
  }
  return slot.narrow(0, n).reshape(shape);
}

}  // namespace weft
