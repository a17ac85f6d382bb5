#include "weft/kernels/dispatch.h"

#include "weft/core/cuda.h"

namespace weft::kernels::detail {

Device kernel_device(const ExecContext& ec, const char* kernel,
                     std::initializer_list<const Tensor*> tensors) {
  const Device device = ec.device();
  int i = 0;
  for (const Tensor* t : tensors) {
    if (t && t->defined()) {
      WEFT_CHECK(t->device() == device,
                 "{}: argument {} ({} {}) is on {} but the execution context runs on {}; move "
                 "the tensor or call the kernel with a context on its device",
                 kernel, i, dtype_name(t->dtype()), t->shape(), t->device(), device);
    }
    ++i;
  }
  if (device.is_cuda()) {
    WEFT_CHECK(device.index < cuda::device_count(), "{}: tensors on {} but {}", kernel, device,
               cuda::device_count() == 0
                   ? cuda::unavailable_reason()
                   : format("this machine has {} GPU(s): use cuda:0 to cuda:{}",
                            cuda::device_count(), cuda::device_count() - 1));
    // CUDA kernels launch on the calling thread's current GPU: make it the context's.
    cuda::make_current(device.index);
  }
  return device;
}

KernelTimer::KernelTimer(const char* kernel, const ExecContext& ec) {
  if (cuda::kernel_profiling()) span_ = new cuda::KernelSpan(kernel, ec.stream());
}

KernelTimer::~KernelTimer() { delete static_cast<cuda::KernelSpan*>(span_); }

void no_kernel(const char* kernel, Device device) {
#if WEFT_HAVE_CUDA
  WEFT_FAIL("{}: tensors on {}, but this kernel has no CUDA implementation yet; run it on the CPU",
            kernel, device);
#else
  WEFT_FAIL(
      "{}: tensors on {} but this build of weft has no CUDA support (configure with "
      "-DWEFT_CUDA=ON where nvcc is installed)",
      kernel, device);
#endif
}

}  // namespace weft::kernels::detail
