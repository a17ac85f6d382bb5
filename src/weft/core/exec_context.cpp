#include "weft/core/exec_context.h"

#include "weft/core/threads.h"

namespace weft {

const ExecContext& ExecContext::host() {
  static const ExecContext context;
  return context;
}

int ExecContext::threads() const { return threads_ > 0 ? threads_ : num_threads(); }

Tensor ExecContext::empty(const Shape& shape, DType dtype, MemoryTag tag) const {
  return Tensor::empty(shape, dtype, device_, tag);
}

Tensor ExecContext::zeros(const Shape& shape, DType dtype, MemoryTag tag) const {
  return Tensor::zeros(shape, dtype, device_, tag);
}

Tensor ExecContext::reuse(Tensor& slot, const Shape& shape, DType dtype, MemoryTag tag) const {
  const int64_t n = shape.numel();
  if (!slot.defined() || !slot.sole_owner() || slot.dtype() != dtype ||
      !(slot.device() == device_) || slot.numel() < n) {
    slot = empty({n}, dtype, tag);
  }
  return slot.narrow(0, n).reshape(shape);
}

}  // namespace weft
