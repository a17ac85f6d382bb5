// The CUDA and NCCL handles the nccl backend (comm/cuda/nccl.cpp) holds, as
// RAII classes, and its status and type translations. Internal to comm/cuda/.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <string>
#include <string_view>

#include "weft/comm/process_group.h"
#include "weft/core/cuda/check.h"
#include "weft/core/cuda/device_guard.h"
#include "weft/core/error.h"

namespace weft::comm::nccl {

// NCCL's text for `status`, with the communicator's last error when it has one.
inline std::string nccl_error(ncclResult_t status, ncclComm_t comm) {
  const char* last = ncclGetLastError(comm);
  return format("{}{}{}", ncclGetErrorString(status), last && *last ? ": " : "", last ? last : "");
}

inline void check_nccl(ncclResult_t status, ncclComm_t comm, std::string_view what,
                       const char* call) {
  WEFT_CHECK(status == ncclSuccess, "{}: {} failed: {}", what, call, nccl_error(status, comm));
}

// A CUDA event of `device`, without timing (the cheap kind).
class Event {
 public:
  Event(int device, std::string_view what) {
    const weft::cuda::DeviceGuard on(device, what);
    WEFT_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), what);
  }
  ~Event() { cudaEventDestroy(event_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// A stream of `device` that the legacy default stream does not synchronize
// with: a collective waiting for its peers must not hold up the device's
// other work (another group's collectives included).
class Stream {
 public:
  Stream(int device, std::string_view what) {
    const weft::cuda::DeviceGuard on(device, what);
    WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), what);
  }
  ~Stream() { cudaStreamDestroy(stream_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// Owns an NCCL communicator: destroyed with its group, or aborted when the
// group fails (after which it is gone).
class Communicator {
 public:
  explicit Communicator(ncclComm_t comm) : comm_(comm) {}
  ~Communicator() {
    if (comm_) ncclCommDestroy(comm_);
  }
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  ncclComm_t get() const { return comm_; }
  void abort() {
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
  }

 private:
  ncclComm_t comm_;
};

// The element type of a reduction (process_group.cpp admits these only).
inline ncclDataType_t reduce_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return ncclFloat32;
    case DType::bf16: return ncclBfloat16;
    case DType::f64: return ncclFloat64;
    case DType::i64: return ncclInt64;
    default: WEFT_FAIL("the nccl backend does not reduce {} tensors", dtype_name(dtype));
  }
}

inline ncclRedOp_t reduce_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::avg: return ncclAvg;
    case ReduceOp::max: return ncclMax;
  }
  WEFT_FAIL("unknown reduction {}", static_cast<int>(op));
}

}  // namespace weft::comm::nccl
