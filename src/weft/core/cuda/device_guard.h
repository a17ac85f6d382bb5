// DeviceGuard: makes a GPU the calling thread's current CUDA device for a
// scope and restores the previous one, because CUDA calls, launches and
// library handles act on the current device while weft's threads move
// between GPUs. Only CUDA code includes it.
#pragma once

#include <cuda_runtime.h>

#include <string_view>

#include "weft/core/cuda/check.h"

namespace weft::cuda {

class DeviceGuard {
 public:
  // `what` prefixes the message of a failed cudaGetDevice / cudaSetDevice.
  explicit DeviceGuard(int device, std::string_view what = {}) {
    WEFT_CUDA_CHECK(cudaGetDevice(&previous_), what);
    if (previous_ != device) WEFT_CUDA_CHECK(cudaSetDevice(device), what);
  }
  // Restoring cannot throw from a destructor: a failure leaves the device set.
  ~DeviceGuard() {
    int now = 0;
    if (cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace weft::cuda
