// How the kernels of kernels/*.cpp pick their implementation: every tensor
// must be on the execution context's device, and the device decides between
// kernels/cpu/ and kernels/cuda/ (compiled only in builds with the CUDA
// backend, WEFT_HAVE_CUDA). Internal to kernels/.
#pragma once

#include <initializer_list>

#include "weft/core/exec_context.h"

namespace weft::kernels::detail {

// The device `kernel` runs on: the context's, once every tensor given (null
// pointers and undefined tensors are skipped) is checked to live there.
Device kernel_device(const ExecContext& ec, const char* kernel,
                     std::initializer_list<const Tensor*> tensors);

// Brackets a CUDA kernel with events while kernel profiling is on
// (cuda::set_kernel_profiling); does nothing otherwise.
class KernelTimer {
 public:
  KernelTimer(const char* kernel, const ExecContext& ec);
  ~KernelTimer();
  KernelTimer(const KernelTimer&) = delete;
  KernelTimer& operator=(const KernelTimer&) = delete;

 private:
  void* span_ = nullptr;
};

// Throws weft::Error: `kernel` has no implementation for tensors on `device`.
[[noreturn]] void no_kernel(const char* kernel, Device device);

// Every kernel's dispatcher: checks the tensors against the context and runs
// `cpu` (the kernels/cpu/ implementation) on a CPU context, `cuda` (the
// kernels/cuda/ one) on a CUDA context. Without the CUDA backend the cuda
// callable is never called, so it may name functions this build lacks. The
// four-argument form is for kernels that have no CUDA implementation yet.
template <typename Cpu, typename Cuda>
decltype(auto) dispatch(const ExecContext& ec, const char* kernel,
                        std::initializer_list<const Tensor*> tensors, Cpu&& cpu,
                        [[maybe_unused]] Cuda&& cuda) {
  const Device device = kernel_device(ec, kernel, tensors);
#if WEFT_HAVE_CUDA
  if (device.is_cuda()) {
    const KernelTimer timer(kernel, ec);
    return cuda();
  }
#endif
  if (!device.is_cpu()) no_kernel(kernel, device);
  return cpu();
}

template <typename Cpu>
decltype(auto) dispatch(const ExecContext& ec, const char* kernel,
                        std::initializer_list<const Tensor*> tensors, Cpu&& cpu) {
  const Device device = kernel_device(ec, kernel, tensors);
  if (!device.is_cpu()) no_kernel(kernel, device);
  return cpu();
}

}  // namespace weft::kernels::detail
