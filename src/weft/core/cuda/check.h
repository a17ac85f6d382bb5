// WEFT_CUDA_CHECK, the one check of a CUDA runtime call's status: a failed
// call throws weft::Error naming the call (and, when given, what weft was
// doing) with the runtime's name and text for the status; check_launch, the
// same for a kernel launch. Only CUDA code
// (the cuda/ folders, compiled in builds with the CUDA backend) includes it.
#pragma once

#include <cuda_runtime.h>

#include <string_view>

#include "weft/core/error.h"

namespace weft::cuda::detail {

[[noreturn]] inline void cuda_call_failed(const char* file, int line, cudaError_t status,
                                          const char* call, std::string_view what = {}) {
  throw_error(file, line,
              format("{}{}{} failed: {} ({})", what, what.empty() ? "" : ": ", call,
                     cudaGetErrorString(status), cudaGetErrorName(status)));
}

}  // namespace weft::cuda::detail

namespace weft::cuda {

// Throws weft::Error naming the kernel if its launch failed (bad
// configuration, or an earlier asynchronous error surfacing here).
inline void check_launch(const char* kernel) {
  const cudaError_t status = cudaGetLastError();
  WEFT_CHECK(status == cudaSuccess, "CUDA kernel {} failed to launch: {} ({})", kernel,
             cudaGetErrorString(status), cudaGetErrorName(status));
}

}  // namespace weft::cuda

// WEFT_CUDA_CHECK(call) or WEFT_CUDA_CHECK(call, what), what a string_view
// that prefixes the message (the operation a failure belongs to).
#define WEFT_CUDA_CHECK(call, ...)                                                 \
  do {                                                                             \
    const cudaError_t weft_cuda_status = (call);                                   \
    if (weft_cuda_status != cudaSuccess) {                                         \
      ::weft::cuda::detail::cuda_call_failed(__FILE__, __LINE__, weft_cuda_status, \
                                             #call __VA_OPT__(, ) __VA_ARGS__);    \
    }                                                                              \
  } while (0)
