// The CUDA runtime behind core/cuda.h in a build with the CUDA backend:
// devices, streams, the caching allocators, copies, host-sync counting, NVTX
// ranges and the kernel profile. core/cuda.cpp holds what every build shares
// and the stand-ins of a build without CUDA.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>

#include "weft/core/cuda.h"
#include "weft/core/cuda/check.h"
#include "weft/core/cuda/device_guard.h"
#include "weft/core/error.h"

namespace weft::cuda {

namespace {

constexpr int kMaxDevices = 16;

struct Runtime {
  int count = 0;
  std::string reason;
};

const Runtime& runtime() {
  static const Runtime r = [] {
    Runtime out;
    const cudaError_t status = cudaGetDeviceCount(&out.count);
    if (status != cudaSuccess) {
      out.count = 0;
      out.reason = format("the CUDA runtime found no usable GPU ({}: {})", cudaGetErrorName(status),
                          cudaGetErrorString(status));
      cudaGetLastError();  // clear the sticky error of a failed probe
    } else if (out.count == 0) {
      out.reason = "the CUDA runtime sees no GPU on this machine";
    }
    return out;
  }();
  return r;
}

// CUDA events as the allocator's markers of a stream's work (without timing,
// the cheap kind).
CachingAllocator::StreamEvents stream_events(int device) {
  return {
      .record = [device](const void* stream) -> void* {
        DeviceGuard guard(device);
        cudaEvent_t e = nullptr;
        WEFT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        WEFT_CUDA_CHECK(cudaEventRecord(e, static_cast<cudaStream_t>(const_cast<void*>(stream))));
        return e;
      },
      .done =
          [](void* e) {
            const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(e));
            if (status == cudaErrorNotReady) {
              cudaGetLastError();  // not ready is not an error to keep
              return false;
            }
            WEFT_CUDA_CHECK(status, "querying a stream's event");
            return true;
          },
      .wait =
          [](void* e) {
            count_host_sync();
            WEFT_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(e)));
          },
      .destroy = [](void* e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); }};
}

CachingAllocator& allocator(int device) {
  // Never destroyed: tensors may be freed during static destruction, after
  // the CUDA runtime itself is gone.
  static std::array<CachingAllocator*, kMaxDevices> allocators{};
  static std::once_flag once[kMaxDevices];
  std::call_once(once[device], [device] {
    allocators[static_cast<size_t>(device)] = new CachingAllocator(
        [device](size_t bytes) -> void* {
          DeviceGuard guard(device);
          void* p = nullptr;
          if (cudaMalloc(&p, bytes) != cudaSuccess) {
            cudaGetLastError();  // out of memory is not sticky: clear it and report null
            return nullptr;
          }
          return p;
        },
        [device](void* p) {
          DeviceGuard guard(device);
          cudaFree(p);
        },
        stream_events(device));
  });
  return *allocators[static_cast<size_t>(device)];
}

cudaMemcpyKind copy_kind(Device dst, Device src) {
  if (dst.is_cpu()) return src.is_cpu() ? cudaMemcpyHostToHost : cudaMemcpyDeviceToHost;
  return src.is_cpu() ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToDevice;
}

}  // namespace

bool built() { return true; }
int device_count() { return runtime().count; }
std::string unavailable_reason() { return runtime().reason; }

std::string device_description(int index) {
  check_device(Device::cuda(index));
  cudaDeviceProp prop{};
  WEFT_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  return format("{} (sm_{}{}, {} SMs, {:.1f} GiB)", prop.name, prop.major, prop.minor,
                prop.multiProcessorCount, static_cast<double>(prop.totalGlobalMem) / (1 << 30));
}

int compute_capability(int index) {
  if (index < 0 || index >= device_count()) return 0;
  int major = 0, minor = 0;
  WEFT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, index));
  WEFT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, index));
  return major * 10 + minor;
}

void check_device(Device d) {
  WEFT_CHECK(d.is_cuda(), "{} is not a CUDA device", d);
  WEFT_CHECK(device_count() > 0, "cannot use {}: {}", d, unavailable_reason());
  WEFT_CHECK(d.index >= 0 && d.index < device_count(),
             "cannot use {}: this machine has {} GPU(s), cuda:0 to cuda:{}", d, device_count(),
             device_count() - 1);
  WEFT_CHECK(d.index < kMaxDevices, "cannot use {}: weft uses at most {} GPUs per process", d,
             kMaxDevices);
}

void make_current(int device) {
  int now = -1;
  WEFT_CUDA_CHECK(cudaGetDevice(&now));
  if (now != device) WEFT_CUDA_CHECK(cudaSetDevice(device));
}

std::shared_ptr<void> new_stream(int device) {
  check_device(Device::cuda(device));
  DeviceGuard guard(device);
  cudaStream_t stream = nullptr;
  WEFT_CUDA_CHECK(cudaStreamCreate(&stream));
  return std::shared_ptr<void>(stream, [device](void* s) {
    // Its kernels finish first: the allocator then hands its blocks back (a
    // new stream may get the same handle). Errors are ignored: at exit the
    // runtime may already be gone.
    try {
      DeviceGuard inner(device);
      cudaStreamSynchronize(static_cast<cudaStream_t>(s));
      allocator(device).release_stream(s);
      cudaStreamDestroy(static_cast<cudaStream_t>(s));
    } catch (const Error&) {
      // A deleter must not throw; the process is ending or the device is lost.
    }
  });
}

void synchronize(Stream stream, int device) {
  count_host_sync();
  DeviceGuard guard(device);
  WEFT_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
}

void synchronize_device(int device) {
  count_host_sync();
  DeviceGuard guard(device);
  WEFT_CUDA_CHECK(cudaDeviceSynchronize());
}

void* allocate(Device d, size_t bytes) {
  check_device(d);
  return allocator(d.index).allocate(bytes, allocation_stream());
}

void release(void* p, Device d) {
  if (p) allocator(d.index).free(p);
}

CachingAllocator::Stats allocator_stats(Device d) {
  check_device(d);
  return allocator(d.index).stats();
}

void record_stream(void* p, Device d, Stream stream) {
  check_device(d);
  allocator(d.index).record_stream(p, stream);
}

void empty_cache(Device d) {
  check_device(d);
  allocator(d.index).release_cached();
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  const Device on = dst_device.is_cuda() ? dst_device : src_device;
  DeviceGuard guard(on.index);
  if (!dst_device.is_cuda() || !src_device.is_cuda()) count_host_sync();
  WEFT_CUDA_CHECK(cudaMemcpy(dst, src, bytes, copy_kind(dst_device, src_device)));
}

void upload_bytes(void* dst, Device d, const void* src, size_t bytes, Stream stream) {
  if (bytes == 0) return;
  DeviceGuard guard(d.index);
  // From pageable memory the runtime stages the bytes and returns (see cuda.h).
  WEFT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice,
                                  static_cast<cudaStream_t>(const_cast<void*>(stream))));
}

void zero_bytes(void* p, Device d, size_t bytes) {
  if (bytes == 0) return;
  DeviceGuard guard(d.index);
  WEFT_CUDA_CHECK(cudaMemset(p, 0, bytes));
}

namespace {

struct Profile {
  std::mutex mu;
  std::vector<cudaEvent_t> pool;
  struct Pending {
    const char* name;
    cudaEvent_t start, stop;
  };
  std::vector<Pending> pending;
  std::map<std::string, KernelTime> totals;
};

Profile& profile() {
  static Profile* p = new Profile;  // never destroyed: spans may end during exit
  return *p;
}

std::atomic<bool>& profiling_flag() {
  static std::atomic<bool> on{[] {
    const char* env = std::getenv("WEFT_CUDA_PROFILE");
    return env && *env && std::string(env) != "0";
  }()};
  return on;
}

cudaEvent_t take_event() {
  Profile& p = profile();
  {
    std::lock_guard<std::mutex> lock(p.mu);
    if (!p.pool.empty()) {
      cudaEvent_t e = p.pool.back();
      p.pool.pop_back();
      return e;
    }
  }
  cudaEvent_t e = nullptr;
  WEFT_CUDA_CHECK(cudaEventCreate(&e));
  return e;
}

}  // namespace

std::atomic<int64_t>& host_sync_count() {
  static std::atomic<int64_t> n{0};
  return n;
}
int64_t host_syncs() { return host_sync_count().load(); }
void count_host_sync() { host_sync_count().fetch_add(1, std::memory_order_relaxed); }

void set_kernel_profiling(bool on) { profiling_flag().store(on); }
bool kernel_profiling() { return profiling_flag().load(); }

// NVTX3 is header-only: the calls reach a tool only when one injected itself.
NvtxRange::NvtxRange(const char* name) { nvtxRangePushA(name); }
NvtxRange::~NvtxRange() { nvtxRangePop(); }

void* record_timing_event(Stream stream, int device) {
  DeviceGuard guard(device);
  cudaEvent_t e = nullptr;
  WEFT_CUDA_CHECK(cudaEventCreate(&e));
  WEFT_CUDA_CHECK(cudaEventRecord(e, static_cast<cudaStream_t>(stream)));
  return e;
}

double elapsed_seconds(void* a, void* b) {
  const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(b));
  if (status == cudaErrorNotReady) {
    cudaGetLastError();  // not ready is not an error to keep
    count_host_sync();
    WEFT_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(b)));
  } else {
    WEFT_CUDA_CHECK(status, "querying a timing event");
  }
  float ms = 0;
  WEFT_CUDA_CHECK(
      cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(a), static_cast<cudaEvent_t>(b)));
  return static_cast<double>(ms) * 1e-3;
}

void destroy_timing_event(void* e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); }

KernelSpan::KernelSpan(const char* name, Stream stream) {
  if (!kernel_profiling()) return;
  name_ = name;
  stream_ = stream;
  start_ = take_event();
  WEFT_CUDA_CHECK(
      cudaEventRecord(static_cast<cudaEvent_t>(start_), static_cast<cudaStream_t>(stream)));
}

KernelSpan::~KernelSpan() {
  if (!name_) return;
  cudaEvent_t stop = nullptr;
  try {
    stop = take_event();
  } catch (const Error&) {
    return;  // no event left: this kernel goes unmeasured
  }
  cudaEventRecord(stop, static_cast<cudaStream_t>(stream_));
  Profile& p = profile();
  std::lock_guard<std::mutex> lock(p.mu);
  p.pending.push_back({name_, static_cast<cudaEvent_t>(start_), stop});
}

std::vector<KernelTime> kernel_profile() {
  Profile& p = profile();
  std::lock_guard<std::mutex> lock(p.mu);
  for (int d = 0; d < device_count(); ++d) synchronize_device(d);
  for (const Profile::Pending& k : p.pending) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, k.start, k.stop) == cudaSuccess) {
      KernelTime& t = p.totals[k.name];
      t.name = k.name;
      ++t.calls;
      t.ms += ms;
    }
    p.pool.push_back(k.start);
    p.pool.push_back(k.stop);
  }
  p.pending.clear();
  std::vector<KernelTime> out;
  for (const auto& [name, t] : p.totals) out.push_back(t);
  std::sort(out.begin(), out.end(),
            [](const KernelTime& a, const KernelTime& b) { return a.ms > b.ms; });
  return out;
}

void reset_kernel_profile() {
  (void)kernel_profile();  // retires pending spans into the pool
  Profile& p = profile();
  std::lock_guard<std::mutex> lock(p.mu);
  p.totals.clear();
}

}  // namespace weft::cuda
