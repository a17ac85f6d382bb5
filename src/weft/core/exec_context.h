// ExecContext: what a kernel runs on and where its tensors are allocated.
//
// On the CPU it is the rank's thread team: kernels use threads() threads
// (0: weft::num_threads() of the calling thread, which under the local
// backend is the rank's thread). On a GPU it is a CUDA stream: kernels
// enqueue on it and return without waiting, and comm::Work::wait(context)
// orders it after a collective.
// Every kernel takes the context it runs on and dispatches on the tensors'
// device; every allocation above kernels/ goes through a context, so no code
// outside core/ and kernels/ names a device.
//
// A context is a small value: copies share whatever the device needs (the
// stream), so a ParallelContext holds one and hands out references.
#pragma once

#include <memory>

#include "weft/core/tensor.h"

namespace weft {

class ExecContext {
 public:
  // The host context: the calling thread's CPU thread team.
  ExecContext() = default;
  ExecContext(Device device, int threads) : device_(device), threads_(threads) {}

  // The default context of the calling thread (the host, default threads).
  static const ExecContext& host();
  // A context on GPU `index` with a stream of its own (throws weft::Error
  // when this build or machine has no such GPU).
  static ExecContext cuda(int index);
  // The host context for Device::cpu(), a new CUDA context otherwise.
  static ExecContext on(Device device);

  Device device() const { return device_; }
  // Threads a CPU kernel on this context uses.
  int threads() const;
  // The same context (device, stream) with CPU kernels on `threads` threads.
  ExecContext with_threads(int threads) const {
    ExecContext c = *this;
    c.threads_ = threads;
    return c;
  }
  // The CUDA stream (cudaStream_t) kernels on this context enqueue on; null
  // on the CPU.
  void* stream() const { return stream_.get(); }
  // Blocks the host until everything queued on this context finished (a
  // no-op on the CPU, whose kernels finish before they return).
  void synchronize() const;

  // Allocation on this context's device.
  Tensor empty(const Shape& shape, DType dtype = DType::f32,
               MemoryTag tag = current_memory_tag()) const;
  Tensor zeros(const Shape& shape, DType dtype = DType::f32,
               MemoryTag tag = current_memory_tag()) const;
  // A tensor of `shape` in the buffer kept in `slot`, when the buffer is of
  // this dtype and device, holds at least that many elements and nothing else
  // references it (a buffer of an earlier call, released by its user);
  // otherwise a new buffer of exactly that size, kept in `slot`. Steady-state
  // callers allocate nothing; a caller still holding the old tensor gets a
  // fresh one.
  // A copy of `t` on this context's device, queued on its stream after the
  // work queued there: a host tensor (a batch of token ids) goes to a GPU
  // without the host waiting for the GPU. `t` itself when it is already here.
  Tensor upload(const Tensor& t, MemoryTag tag = current_memory_tag()) const;
  Tensor reuse(Tensor& slot, const Shape& shape, DType dtype,
               MemoryTag tag = current_memory_tag()) const;

 private:
  Device device_ = Device::cpu();
  int threads_ = 0;
  std::shared_ptr<void> stream_;
};

}  // namespace weft
