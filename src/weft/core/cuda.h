// The CUDA runtime as the rest of weft sees it: devices, streams, device
// memory and copies. Declared in every build, so that code above core/ can ask
// whether a GPU is there; without the CUDA backend (WEFT_CUDA=OFF, or no
// toolkit at configure time) device_count() is 0 and everything else throws
// weft::Error saying so. No CUDA header is included here: streams travel as
// opaque pointers (cudaStream_t).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "weft/core/caching_allocator.h"
#include "weft/core/device.h"
#include "weft/core/dtype.h"

namespace weft::cuda {

// Whether this build has the CUDA backend.
bool built();
// GPUs the CUDA runtime sees; 0 when the build has no CUDA backend, or the
// machine no driver or no GPU.
int device_count();
// Why device_count() is 0, as a sentence for a skip or an error message;
// empty when there is a GPU.
std::string unavailable_reason();
// "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB)".
std::string device_description(int index);
// The compute capability major·10 + minor (90 for sm_90); 0 without the
// CUDA backend or for an index that is not a GPU of this machine.
int compute_capability(int index);
// Throws weft::Error unless `d` is a CUDA device this process can use.
void check_device(Device d);
// Makes `device` the calling thread's current GPU (where kernels launch and
// the CUDA runtime allocates), if it is not already.
void make_current(int device);

using Stream = void*;  // cudaStream_t
// A new stream on `device`, destroyed with its last handle. It synchronizes
// with the legacy default stream, so the synchronous copies below (and the
// host reads of tensors) see every kernel queued before them.
std::shared_ptr<void> new_stream(int device);
// Blocks the host until all work queued on `stream` finished.
void synchronize(Stream stream, int device);
// Blocks the host until all work on `device` finished.
void synchronize_device(int device);

// Device memory, through a caching allocator per device (core/caching_allocator.h).
// A block belongs to the calling thread's allocation stream (below).
void* allocate(Device d, size_t bytes);
void release(void* p, Device d);
CachingAllocator::Stats allocator_stats(Device d);
// Work queued on `stream` uses the block at `p` (from allocate on `d`, made
// for another stream): when it is released, the block is reused only after
// that work finished (the caching allocator's record_stream, with CUDA events).
void record_stream(void* p, Device d, Stream stream);
// Gives every cached block of `d` back to the driver.
void empty_cache(Device d);

// The stream that allocations of the calling thread are made for (null: the
// legacy default stream). ExecContext sets it around its allocations.
// Allocations outside a context (Tensor::empty on a GPU, Tensor::to) belong to
// the legacy stream and are shared by every thread: their first write must be
// ordered on it (the copies and zeroing here are) — a kernel on another
// stream writing such a fresh block first could race with the block's last
// reader on a third stream. Allocate through the context kernels run on.
Stream allocation_stream();
class ScopedAllocationStream {
 public:
  explicit ScopedAllocationStream(Stream stream);
  ~ScopedAllocationStream();
  ScopedAllocationStream(const ScopedAllocationStream&) = delete;
  ScopedAllocationStream& operator=(const ScopedAllocationStream&) = delete;

 private:
  Stream previous_;
};

// Byte copies between any two devices (host included), on the legacy default
// stream: ordered after the work already queued on every weft stream and
// before what is queued later. A copy involving the host is complete when it
// returns; one between two GPU buffers may still be running (the CUDA runtime
// does not wait for it), which the ordering makes invisible to weft's kernels.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
// Copies `bytes` bytes of pageable host memory to device memory of `d`,
// queued on `stream` after the work queued there. The runtime has read the
// host bytes when it returns (they may change at once; this would not hold
// for pinned memory, which weft does not allocate); for small copies such as
// a batch's token ids it stages them without waiting for the GPU, larger
// ones may wait for the stream (the CUDA runtime's rule for pageable memory).
void upload_bytes(void* dst, Device d, const void* src, size_t bytes, Stream stream);
// Sets `bytes` bytes of device memory to zero, on the legacy default stream
// (ordered as copy_bytes; the host does not wait for it).
void zero_bytes(void* p, Device d, size_t bytes);
// Converts n elements in device memory of `d` between f32 and bf16 (the
// conversions a step needs on the GPU), queued on the legacy default stream,
// which orders it with every weft stream; false for other dtype pairs (the
// caller converts through the host).
bool convert_on_device(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n,
                       Device d);

// Per-kernel GPU time, for finding where a step's time goes: while profiling
// is on (set_kernel_profiling, or WEFT_CUDA_PROFILE=1 in the environment),
// every CUDA kernel weft dispatches is bracketed by two events on its stream.
// Costs two event records per kernel; off by default.
void set_kernel_profiling(bool on);
bool kernel_profiling();
struct KernelTime {
  std::string name;
  int64_t calls = 0;
  double ms = 0;  // GPU time between the kernel's two events, summed
};
// Waits for every GPU and returns the time per kernel name since the last
// reset, longest first.
std::vector<KernelTime> kernel_profile();
void reset_kernel_profile();
// Host synchronizations with a GPU: the times weft's code made the host wait
// for device work (stream / event / device synchronizations, copies to or
// from host memory), counted per process since it started. `bench step
// --profile` prints them per step.
int64_t host_syncs();
// Counts one (called by the code that synchronizes).
void count_host_sync();

// An NVTX range for Nsight Systems and other NVTX tools: opened here, closed
// when it goes out of scope, on the calling thread. weft marks the training
// step's phases (forward, backward, gradient sync, optimizer), every module's
// forward and backward, and the collectives. Without a tool attached a range
// costs a check of one function pointer; builds without CUDA have no NVTX.
class NvtxRange {
 public:
  explicit NvtxRange(const char* name);
  explicit NvtxRange(const std::string& name) : NvtxRange(name.c_str()) {}
  ~NvtxRange();
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

// A CUDA event with timing, recorded on `stream` of GPU `device`
// (PhaseClock's points); elapsed_seconds(a, b) waits for b when it has not
// completed (counted as a host synchronization) and gives b - a.
void* record_timing_event(Stream stream, int device);
double elapsed_seconds(void* a, void* b);
void destroy_timing_event(void* e);

// Brackets one kernel (`name` must outlive the profile: a literal) on `stream`.
class KernelSpan {
 public:
  KernelSpan(const char* name, Stream stream);
  ~KernelSpan();
  KernelSpan(const KernelSpan&) = delete;
  KernelSpan& operator=(const KernelSpan&) = delete;

 private:
  // Unused in builds without CUDA, whose KernelSpan does nothing.
  [[maybe_unused]] const char* name_ = nullptr;  // null when profiling is off
  [[maybe_unused]] Stream stream_ = nullptr;
  [[maybe_unused]] void* start_ = nullptr;
};

}  // namespace weft::cuda
