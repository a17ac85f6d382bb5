// Parallel contexts for tests: the options modules took one by one before
// they shared a parallel::ParallelContext, on the device a test chooses.
#pragma once

#include <memory>

#include "weft/parallel/context.h"

namespace weft {

// The device the modules built by ctx_of run on: the host unless a test
// chooses a GPU (the TP-equivalence suite runs its cases on both). Per
// thread, so that each rank thread of a local world chooses for itself.
inline Device& test_device() {
  thread_local Device device = Device::cpu();
  return device;
}

// Sets the calling thread's test_device() for its lifetime.
class ScopedTestDevice {
 public:
  explicit ScopedTestDevice(Device d) : previous_(test_device()) { test_device() = d; }
  ~ScopedTestDevice() { test_device() = previous_; }
  ScopedTestDevice(const ScopedTestDevice&) = delete;
  ScopedTestDevice& operator=(const ScopedTestDevice&) = delete;

 private:
  Device previous_;
};

// The execution context on device `d`: the host's, or on a GPU one context
// (one stream) per thread, shared by every module that thread builds, as a
// rank's modules share its ParallelContext's.
inline ExecContext exec_on(Device d) {
  if (d.is_cpu()) return ExecContext::host();
  thread_local ExecContext context;
  if (!(context.device() == d)) context = ExecContext::cuda(d.index);
  return context;
}

// The execution context on test_device().
inline ExecContext test_exec() { return exec_on(test_device()); }

// `t` on test_device() (`t` itself when it is there).
inline Tensor on_test_device(const Tensor& t) { return t.to(test_device()); }

// The context to run a kernel or mapping on for tensor `t`: its device's.
inline ExecContext exec_of(const Tensor& t) { return exec_on(t.device()); }

// A context with these options on the host: a reference to compare with.
inline parallel::ContextPtr host_ctx_of(
    std::shared_ptr<comm::ProcessGroup> tp = nullptr,
    parallel::SequenceParallel sp = parallel::SequenceParallel::off, DType compute = DType::f32,
    uint64_t seed = 0) {
  return parallel::make_context(std::move(tp), sp, parallel::Precision::of(compute), seed);
}

// A context with these options on test_device().
inline parallel::ContextPtr ctx_of(std::shared_ptr<comm::ProcessGroup> tp = nullptr,
                                   parallel::SequenceParallel sp = parallel::SequenceParallel::off,
                                   DType compute = DType::f32, uint64_t seed = 0) {
  auto c = host_ctx_of(std::move(tp), sp, compute, seed);
  if (test_device().is_cpu()) return c;
  auto on_device = std::make_shared<parallel::ParallelContext>(*c);
  on_device->exec = test_exec();
  return on_device;
}

// The same with a comm-GEMM overlap configuration.
inline parallel::ContextPtr ctx_of(std::shared_ptr<comm::ProcessGroup> tp,
                                   parallel::SequenceParallel sp, DType compute, uint64_t seed,
                                   parallel::OverlapConfig overlap) {
  auto c = std::make_shared<parallel::ParallelContext>(*ctx_of(std::move(tp), sp, compute, seed));
  c->workspace = std::make_shared<parallel::Workspace>();
  c->overlap = std::move(overlap);
  return c;
}

}  // namespace weft
