// How the kernels of kernels/*.cpp pick their implementation: every tensor
// must be on the execution context's device, and the device decides between
// the Backend::cpu and Backend::cuda specializations of the kernel's template
// in kernels/impl/ (the cuda ones compiled only in builds with the CUDA
// backend, WEFT_HAVE_CUDA). Internal to kernels/.
#pragma once

#include <initializer_list>

#include "weft/core/exec_context.h"

namespace weft::kernels {

// The implementations a kernel has: kernels/cpu/ and kernels/cuda/ define the
// specializations of the templates in kernels/impl/ for their backend.
enum class Backend { cpu, cuda };

}  // namespace weft::kernels

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
// `impl`, a generic lambda `[&]<Backend B>() { return impl::f<B>(...); }`,
// with the context's backend. Without the CUDA backend it is never
// instantiated for Backend::cuda, so the cuda specializations (compiled only
// in CUDA builds) are never referenced.
template <typename Impl>
decltype(auto) dispatch(const ExecContext& ec, const char* kernel,
                        std::initializer_list<const Tensor*> tensors, Impl&& impl) {
  const Device device = kernel_device(ec, kernel, tensors);
#if WEFT_HAVE_CUDA
  if (device.is_cuda()) {
    const KernelTimer timer(kernel, ec);
    return impl.template operator()<Backend::cuda>();
  }
#endif
  if (!device.is_cpu()) no_kernel(kernel, device);
  return impl.template operator()<Backend::cpu>();
}

// For kernels that have no CUDA implementation yet: `cpu` runs on a CPU
// context, any other device throws.
template <typename Cpu>
decltype(auto) dispatch_cpu_only(const ExecContext& ec, const char* kernel,
                                 std::initializer_list<const Tensor*> tensors, Cpu&& cpu) {
  const Device device = kernel_device(ec, kernel, tensors);
  if (!device.is_cpu()) no_kernel(kernel, device);
  return cpu();
}

}  // namespace weft::kernels::detail
