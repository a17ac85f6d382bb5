#include "weft/core/cuda.h"

#include "weft/core/error.h"

// What every build shares; the CUDA runtime itself is core/cuda/runtime.cpp,
// compiled only with the CUDA backend. A build without it gets the stand-ins
// below: no device, and an error naming the call for anything that needs one.
namespace weft::cuda {

namespace {
thread_local Stream t_allocation_stream = nullptr;
}  // namespace

Stream allocation_stream() { return t_allocation_stream; }
ScopedAllocationStream::ScopedAllocationStream(Stream stream) : previous_(t_allocation_stream) {
  t_allocation_stream = stream;
}
ScopedAllocationStream::~ScopedAllocationStream() { t_allocation_stream = previous_; }

#if !WEFT_HAVE_CUDA

namespace {
[[noreturn]] void not_built(const char* what) {
  WEFT_FAIL(
      "{}: this build of weft has no CUDA support; rebuild with nvcc on PATH "
      "(cmake -DWEFT_CUDA=ON)",
      what);
}
}  // namespace

bool built() { return false; }
int device_count() { return 0; }
std::string unavailable_reason() {
  return "this build of weft has no CUDA support (configure with -DWEFT_CUDA=ON)";
}
std::string device_description(int) { not_built("device_description"); }
int compute_capability(int) { return 0; }
void check_device(Device d) { WEFT_FAIL("cannot use {}: {}", d, unavailable_reason()); }
void make_current(int) { not_built("make_current"); }
std::shared_ptr<void> new_stream(int) { not_built("new_stream"); }
void synchronize(Stream, int) { not_built("synchronize"); }
void synchronize_device(int) { not_built("synchronize_device"); }
void* allocate(Device d, size_t) {
  WEFT_FAIL("cannot allocate on {}: {}", d, unavailable_reason());
}
void release(void*, Device) {}
CachingAllocator::Stats allocator_stats(Device) { not_built("allocator_stats"); }
void empty_cache(Device) { not_built("empty_cache"); }
void copy_bytes(void*, Device, const void*, Device, size_t) { not_built("copy_bytes"); }
void record_stream(void*, Device, Stream) { not_built("record_stream"); }
void zero_bytes(void*, Device, size_t) { not_built("zero_bytes"); }
void upload_bytes(void*, Device, const void*, size_t, Stream) { not_built("upload_bytes"); }
bool convert_on_device(const void*, DType, void*, DType, int64_t, Device) {
  not_built("convert_on_device");
}
int64_t host_syncs() { return 0; }
void count_host_sync() {}

void set_kernel_profiling(bool) {}
bool kernel_profiling() { return false; }
std::vector<KernelTime> kernel_profile() { return {}; }
void reset_kernel_profile() {}
NvtxRange::NvtxRange(const char*) {}
NvtxRange::~NvtxRange() = default;

void* record_timing_event(Stream, int) { not_built("record_timing_event"); }
double elapsed_seconds(void*, void*) { not_built("elapsed_seconds"); }
void destroy_timing_event(void*) {}

KernelSpan::KernelSpan(const char*, Stream) {}
KernelSpan::~KernelSpan() = default;

#endif

}  // namespace weft::cuda
