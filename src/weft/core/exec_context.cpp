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

Tensor ExecContext::reuse(Tensor& slot, const Shape& shape, DType dtype, MemoryTag tag) const {
  const int64_t n = shape.numel();
  if (!slot.defined() || !slot.sole_owner() || slot.dtype() != dtype ||
      !(slot.device() == device_) || slot.numel() < n) {
    slot = empty({n}, dtype, tag);  // on this context's stream
  }
  return slot.narrow(0, n).reshape(shape);
}

}  // namespace weft
