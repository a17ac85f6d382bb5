#include "weft/kernels/impl/gemm.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "weft/core/cuda.h"
#include "weft/core/cuda/device_guard.h"
#include "weft/core/error.h"
#include "weft/kernels/cuda/gemm.h"

namespace weft::kernels::impl {

namespace {

// cuBLASLt recommends 32 MiB on Hopper; the workspace an algorithm needs
// (often none) is taken from the caching allocator per call.
constexpr uint64_t kMaxWorkspace = 32ull << 20;

// How many of the heuristic's candidates the first call of a shape times
// (WEFT_GEMM_TUNE=0: none, the heuristic's first is taken).
constexpr int kCandidates = 8;
// Tuning (tune, below) times every candidate until it has at least
// kMinSamples samples and kTuneWorkMs of runs, a sample being kSampleMs of
// back-to-back runs (at least one), in at most kMaxRounds rounds; another
// candidate replaces the heuristic's first only when its median is more than
// kClearlyFaster below the first's.
constexpr int kMinSamples = 5;
constexpr double kTuneWorkMs = 0.2;
constexpr double kSampleMs = 0.02;
constexpr int kMaxRounds = 100;
constexpr int kMaxRepeats = 16;
constexpr double kClearlyFaster = 0.03;
bool tuning_on() {
  static const bool on = [] {
    const char* v = std::getenv("WEFT_GEMM_TUNE");
    return v == nullptr || std::string(v) != "0";
  }();
  return on;
}

// One operand in cuBLASLt's column-major terms.
struct Layout {
  int64_t rows = 0, cols = 0, ld = 0;
  int64_t batch = 1, stride = 0;  // the batch cuBLASLt runs (strided)
  bool transposed = false;        // op(X) = Xᵀ
  cudaDataType_t type = CUDA_R_32F;
  int64_t alignment = 256;  // bytes, of every matrix's first element
};

// Everything that selects a plan.
struct Problem {
  int device = 0;
  Layout a, b, c;  // cuBLASLt's A (weft's b), B (weft's a), C = D
  // 0: no bias vector; else 1 + the cudaDataType_t of the bias (BIAS,
  // GELU_AUX_BIAS) or of the bias gradient (DGELU_BGRAD, BGRADB).
  int64_t bias = 0;
  int64_t fast_accumulation = 0;  // FP8: Hopper's fast accumulation
  // 0: the bias's epilogue (BIAS, or none); else the cublasLtEpilogue_t of a
  // GemmEpilogue (GELU_AUX(_BIAS), DGELU(_BGRAD), BGRADB).
  int64_t epilogue = 0;
  int64_t aux_ld = 0;  // GELU_AUX / DGELU: the pre-activation's leading dimension
  // Alignments (bytes) of the bias vector and the aux matrix, which the
  // heuristic reads from their pointers.
  int64_t bias_alignment = 0, aux_alignment = 0;
  std::string describe() const {  // for error messages, in weft's terms
    const int64_t m = c.cols, n = c.rows, k = a.transposed ? a.rows : a.cols;
    return fmt::format("{}x{} · {}x{} GEMM ({} in, {} out, batch {}, {}{}, epilogue {}, cuda:{})",
                       m, k, k, n, type_name(b.type), type_name(c.type), c.batch,
                       b.transposed ? "aᵀ" : "a", a.transposed ? "·bᵀ" : "·b",
                       epilogue != 0 ? epilogue
                       : bias != 0   ? static_cast<int64_t>(CUBLASLT_EPILOGUE_BIAS)
                                     : int64_t{0},
                       device);
  }
  static const char* type_name(cudaDataType_t t) {
    switch (t) {
      case CUDA_R_16BF: return "bf16";
      case CUDA_R_8F_E4M3: return "fp8_e4m3";
      case CUDA_R_8F_E5M2: return "fp8_e5m2";
      default: return "f32";
    }
  }
};

using Key = std::array<int64_t, 3 * 8 + 7>;

Key key_of(const Problem& p) {
  Key k{};
  size_t i = 0;
  for (const Layout* l : {&p.a, &p.b, &p.c}) {
    k[i++] = l->rows;
    k[i++] = l->cols;
    k[i++] = l->ld;
    k[i++] = l->batch;
    k[i++] = l->stride;
    k[i++] = l->transposed;
    k[i++] = l->type;
    k[i++] = l->alignment;
  }
  k[i++] = p.device;
  k[i++] = p.bias;
  k[i++] = p.fast_accumulation;
  k[i++] = p.epilogue;
  k[i++] = p.aux_ld;
  k[i++] = p.bias_alignment;
  k[i++] = p.aux_alignment;
  return k;
}

struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = 1469598103934665603ull;
    for (int64_t v : k) h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

void check(cublasStatus_t status, const char* call, const Problem& p) {
  WEFT_CHECK(status == CUBLAS_STATUS_SUCCESS, "{} failed for a {}: {}", call, p.describe(),
             cublasLtGetStatusString(status));
}

// One handle per device, shared by all threads. Never destroyed: at exit the
// CUDA runtime may already be torn down when static destructors run.
cublasLtHandle_t handle(const Problem& p) {
  static std::mutex mu;
  static std::unordered_map<int, cublasLtHandle_t> handles;
  const std::lock_guard lock(mu);
  cublasLtHandle_t& h = handles[p.device];
  if (!h) check(cublasLtCreate(&h), "cublasLtCreate", p);
  return h;
}

// Descriptors and the algorithm of one problem. Per thread, since the bias
// and aux pointers are attributes of the matmul descriptor, set on every call.
struct Plan {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  bool bias_epilogue = false;
  // A GemmEpilogue's problem (Problem::epilogue) that cuBLASLt refused: no
  // algorithm, or none ran. No descriptors; its calls run unfused.
  bool refused = false;
  // The heuristic's best candidates, best first; the first call times them
  // (tune) and keeps the fastest in algo.
  std::vector<cublasLtMatmulHeuristicResult_t> candidates;
  bool tuned = false;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

struct Cache {
  std::unordered_map<Key, std::unique_ptr<Plan>, KeyHash> plans;
  int64_t created = 0;
};

Cache& cache() {
  thread_local Cache c;
  return c;
}

cublasLtMatrixLayout_t make_layout(const Layout& l, const Problem& p) {
  cublasLtMatrixLayout_t layout = nullptr;
  check(cublasLtMatrixLayoutCreate(&layout, l.type, static_cast<uint64_t>(l.rows),
                                   static_cast<uint64_t>(l.cols), l.ld),
        "cublasLtMatrixLayoutCreate", p);
  if (l.batch > 1) {
    const auto count = static_cast<int32_t>(l.batch);
    check(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                           sizeof(count)),
          "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)", p);
    check(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                           &l.stride, sizeof(l.stride)),
          "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)", p);
  }
  return layout;
}

// A pointer value with exactly the given alignment, for the heuristic, which
// reads the alignment of the bias and aux pointers from their values without
// dereferencing them (cublasLt.h): a plan serves every call whose pointers
// have that alignment (it is part of the key).
const void* representative(int64_t alignment) {
  return reinterpret_cast<const void*>(static_cast<uintptr_t>(alignment));
}

// Builds the descriptors and asks the heuristic for the best algorithm;
// false when no algorithm takes this problem with its epilogue (the caller
// then drops the bias epilogue, or runs a GemmEpilogue unfused).
bool build(Plan& plan, const Problem& p, bool with_epilogue) {
  plan.handle = handle(p);
  check(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
        "cublasLtMatmulDescCreate", p);
  auto set = [&](cublasLtMatmulDescAttributes_t attr, const auto& value, const char* what) {
    check(cublasLtMatmulDescSetAttribute(plan.desc, attr, &value, sizeof(value)), what, p);
  };
  const int32_t op_a = p.a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int32_t op_b = p.b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  set(CUBLASLT_MATMUL_DESC_TRANSA, op_a, "cublasLtMatmulDescSetAttribute(TRANSA)");
  set(CUBLASLT_MATMUL_DESC_TRANSB, op_b, "cublasLtMatmulDescSetAttribute(TRANSB)");
  if (p.fast_accumulation) {
    const int8_t fast = 1;
    set(CUBLASLT_MATMUL_DESC_FAST_ACCUM, fast, "cublasLtMatmulDescSetAttribute(FAST_ACCUM)");
  }
  if (with_epilogue) {
    // An attribute this cuBLASLt rejects refuses the epilogue, as a missing
    // algorithm does.
    auto try_set = [&](cublasLtMatmulDescAttributes_t attr, const auto& value) {
      return cublasLtMatmulDescSetAttribute(plan.desc, attr, &value, sizeof(value)) ==
             CUBLAS_STATUS_SUCCESS;
    };
    const auto epilogue =
        static_cast<uint32_t>(p.epilogue != 0 ? p.epilogue : int64_t{CUBLASLT_EPILOGUE_BIAS});
    if (!try_set(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue)) return false;
    if (p.bias != 0) {
      const auto bias_type = static_cast<int32_t>(p.bias - 1);
      if (!try_set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type) ||
          !try_set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, representative(p.bias_alignment))) {
        return false;
      }
    }
    // The aux matrix (the pre-activation) has the output's type, the
    // default of CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE (set only for
    // FP8 outputs), so the attribute is left unset.
    if (p.aux_ld != 0) {
      const int64_t ld = p.aux_ld;
      if (!try_set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, ld) ||
          !try_set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, representative(p.aux_alignment))) {
        return false;
      }
    }
  }
  plan.bias_epilogue = with_epilogue && p.epilogue == 0;
  plan.a = make_layout(p.a, p);
  plan.b = make_layout(p.b, p);
  plan.c = make_layout(p.c, p);

  cublasLtMatmulPreference_t pref = nullptr;
  check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate", p);
  const std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>,
                        decltype(&cublasLtMatmulPreferenceDestroy)>
      owned(pref, cublasLtMatmulPreferenceDestroy);
  auto prefer = [&](cublasLtMatmulPreferenceAttributes_t attr, const auto& value,
                    const char* what) {
    check(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)), what, p);
  };
  prefer(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, kMaxWorkspace,
         "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)");
  // The heuristic assumes 256-byte aligned matrices unless told otherwise;
  // views into wider buffers (attention heads) are often less aligned.
  const auto align_a = static_cast<uint32_t>(p.a.alignment);
  const auto align_b = static_cast<uint32_t>(p.b.alignment);
  const auto align_c = static_cast<uint32_t>(p.c.alignment);
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a,
         "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_A_BYTES)");
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b,
         "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_B_BYTES)");
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_c,
         "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_C_BYTES)");
  prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_c,
         "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_D_BYTES)");

  std::array<cublasLtMatmulHeuristicResult_t, kCandidates> results{};
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(plan.handle, plan.desc, plan.a, plan.b, plan.c, plan.c, pref,
                                     kCandidates, results.data(), &found);
  if (with_epilogue && (status != CUBLAS_STATUS_SUCCESS || found == 0)) return false;
  check(status, "cublasLtMatmulAlgoGetHeuristic", p);
  WEFT_CHECK(found > 0, "cuBLASLt has no algorithm for a {}", p.describe());
  for (int i = 0; i < found; ++i) {
    if (results[i].state == CUBLAS_STATUS_SUCCESS) plan.candidates.push_back(results[i]);
  }
  if (with_epilogue && plan.candidates.empty()) return false;
  WEFT_CHECK(!plan.candidates.empty(), "cuBLASLt has no usable algorithm for a {}", p.describe());
  plan.algo = plan.candidates[0].algo;
  plan.workspace = plan.candidates[0].workspaceSize;
  return true;
}

Plan& plan_for(const Problem& p) {
  Cache& cc = cache();
  const Key key = key_of(p);
  auto it = cc.plans.find(key);
  if (it != cc.plans.end()) return *it->second;
  auto plan = std::make_unique<Plan>();
  if (!build(*plan, p, p.bias != 0 || p.epilogue != 0)) {
    plan = std::make_unique<Plan>();
    if (p.epilogue != 0) {
      plan->refused = true;  // remembered: this shape's calls run unfused
    } else {
      build(*plan, p, false);
    }
  }
  ++cc.created;
  return *cc.plans.emplace(key, std::move(plan)).first->second;
}

// The workspace of one call, from the caching allocator on the context's
// stream. Released when the call is enqueued: the block goes back to the cache
// of that stream, whose later work runs after these matmuls.
struct Workspace {
  Workspace(const ExecContext& ec, size_t bytes) : device(ec.device()) {
    if (bytes == 0) return;
    const weft::cuda::ScopedAllocationStream on_stream(ec.stream());
    ptr = weft::cuda::allocate(device, bytes);
  }
  ~Workspace() {
    if (ptr) weft::cuda::release(ptr, device);
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  Device device;
  void* ptr = nullptr;
};

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::bf16: return CUDA_R_16BF;
    case DType::e4m3: return CUDA_R_8F_E4M3;
    case DType::e5m2: return CUDA_R_8F_E5M2;
    default: return CUDA_R_32F;
  }
}

// The largest power of two (at most 256) dividing every value: the alignment
// in bytes of addresses base + i·step for all steps.
int64_t alignment(std::initializer_list<uint64_t> values) {
  uint64_t bits = 256;
  for (uint64_t v : values) bits |= v;
  return static_cast<int64_t>(bits & (~bits + 1));
}

// A weft matrix (row-major view with strides) as the cuBLASLt operand that,
// with its op, is the matrix's transpose: cuBLASLt is column-major, so weft's
// c = a·b is computed as cᵀ = bᵀ·aᵀ.
Layout layout_of(const StridedMatrices& s, int64_t batch, int64_t stride, int64_t outer_stride) {
  WEFT_CHECK(s.col_stride == 1 || s.row_stride == 1,
             "gemm operand needs a dense row or column, got strides ({}, {})", s.row_stride,
             s.col_stride);
  Layout l;
  l.transposed = s.col_stride != 1;
  l.rows = l.transposed ? s.rows : s.cols;
  l.cols = l.transposed ? s.cols : s.rows;
  l.ld = l.transposed ? s.col_stride : s.row_stride;
  // A single column's leading dimension is never used, but must be valid.
  if (l.cols == 1) l.ld = std::max(l.ld, l.rows);
  l.batch = batch;
  l.stride = stride;
  l.type = cuda_type(s.dtype);
  const auto es = static_cast<uint64_t>(dtype_storage_bytes(s.dtype, 1));
  l.alignment = alignment({reinterpret_cast<uintptr_t>(s.data), static_cast<uint64_t>(stride) * es,
                           static_cast<uint64_t>(outer_stride) * es});
  return l;
}

// CUDA events, destroyed with the object.
struct Events {
  explicit Events(size_t n) : events(n, nullptr) {
    for (cudaEvent_t& e : events) WEFT_CUDA_CHECK(cudaEventCreate(&e), "gemm tuning");
  }
  ~Events() {
    for (cudaEvent_t e : events) {
      if (e) cudaEventDestroy(e);
    }
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  std::vector<cudaEvent_t> events;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 == 1 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

// Times the plan's candidates on this call's operands (the output into
// scratch memory, so an accumulating call's c is untouched; an aux or bias
// gradient output is written, and the call itself writes it again) and keeps
// the fastest: the heuristic's first pick is not always the fastest on a
// given shape. A GEMM of 10-20 us timed three times picked by noise, so the
// candidates are timed in alternation, round after round (drift in clocks
// hits all alike), a sample being ~kSampleMs of back-to-back runs between
// two events, until each has kMinSamples samples and kTuneWorkMs of runs;
// the medians decide, and the heuristic's first stays unless another is
// more than kClearlyFaster faster. Synchronizes the stream once per round,
// on the first call of a shape and thread; a candidate that fails to run is
// dropped. A GemmEpilogue's plan none of whose candidates runs is refused.
void tune(Plan& plan, const ExecContext& ec, const Problem& p, const void* pa, const void* pb,
          float alpha) {
  plan.tuned = true;
  if (plan.candidates.size() < 2 || !tuning_on()) return;
  const auto stream = static_cast<cudaStream_t>(ec.stream());
  const Layout& l = p.c;
  const auto es = static_cast<int64_t>(l.type == CUDA_R_16BF ? 2 : l.type == CUDA_R_32F ? 4 : 1);
  const int64_t elements = (l.batch - 1) * l.stride + l.ld * (l.cols - 1) + l.rows;
  const Workspace scratch(ec, static_cast<size_t>(elements * es));
  size_t most = 0;
  for (const auto& c : plan.candidates) most = std::max(most, c.workspaceSize);
  const Workspace workspace(ec, most);
  const float beta = 0.0f;
  auto run = [&](size_t i) {
    const auto& c = plan.candidates[i];
    return cublasLtMatmul(plan.handle, plan.desc, &alpha, pb, plan.a, pa, plan.b, &beta,
                          scratch.ptr, plan.c, scratch.ptr, plan.c, &c.algo, workspace.ptr,
                          c.workspaceSize, stream) == CUBLAS_STATUS_SUCCESS;
  };
  // The warm-up: one run each; candidates that fail are dropped.
  std::vector<size_t> live;
  for (size_t i = 0; i < plan.candidates.size(); ++i) {
    if (run(i)) live.push_back(i);
  }
  if (live.empty()) {
    if (p.epilogue != 0) plan.refused = true;
    return;
  }
  const size_t count = live.size();
  const Events ev(2 * count);
  auto elapsed = [&](size_t j) {
    float ms = 0.0f;
    WEFT_CUDA_CHECK(cudaEventElapsedTime(&ms, ev.events[2 * j], ev.events[2 * j + 1]),
                    "gemm tuning");
    return static_cast<double>(ms);
  };
  // How many runs make a sample: one run of the first candidate, timed.
  WEFT_CUDA_CHECK(cudaEventRecord(ev.events[0], stream), "gemm tuning");
  const bool first_ok = run(live[0]);
  WEFT_CUDA_CHECK(cudaEventRecord(ev.events[1], stream), "gemm tuning");
  WEFT_CUDA_CHECK(cudaEventSynchronize(ev.events[1]), "gemm tuning");
  const double once = std::max(elapsed(0), 1e-4);
  const int repeats =
      first_ok ? std::clamp(static_cast<int>(kSampleMs / once) + 1, 1, kMaxRepeats) : 1;
  std::vector<std::vector<double>> samples(count);
  std::vector<double> work(count, 0.0);
  std::vector<bool> ok(count, true);
  for (int round = 0; round < kMaxRounds; ++round) {
    std::vector<size_t> timed;
    for (size_t j = 0; j < count; ++j) {
      if (!ok[j] ||
          (samples[j].size() >= static_cast<size_t>(kMinSamples) && work[j] >= kTuneWorkMs)) {
        continue;
      }
      WEFT_CUDA_CHECK(cudaEventRecord(ev.events[2 * j], stream), "gemm tuning");
      for (int r = 0; r < repeats && ok[j]; ++r) ok[j] = run(live[j]);
      WEFT_CUDA_CHECK(cudaEventRecord(ev.events[2 * j + 1], stream), "gemm tuning");
      timed.push_back(j);
    }
    if (timed.empty()) break;
    WEFT_CUDA_CHECK(cudaEventSynchronize(ev.events[2 * timed.back() + 1]), "gemm tuning");
    for (size_t j : timed) {
      if (!ok[j]) continue;
      const double ms = elapsed(j);
      samples[j].push_back(ms / repeats);
      work[j] += ms;
    }
  }
  // The heuristic's first (when it ran), unless another is clearly faster.
  std::vector<double> medians(count, -1.0);
  for (size_t j = 0; j < count; ++j) {
    if (ok[j] && !samples[j].empty()) medians[j] = median(samples[j]);
  }
  size_t best = count;
  for (size_t j = 0; j < count; ++j) {
    if (medians[j] >= 0.0 && (best == count || medians[j] < medians[best])) best = j;
  }
  if (best == count) {
    if (p.epilogue != 0) plan.refused = true;
    return;
  }
  if (live[0] == 0 && medians[0] >= 0.0 && medians[best] >= (1.0 - kClearlyFaster) * medians[0]) {
    best = 0;
  }
  plan.algo = plan.candidates[live[best]].algo;
  plan.workspace = plan.candidates[live[best]].workspaceSize;
}

// A vector of n elements as one dense row.
StridedMatrices vector_of(const Tensor& t) {
  StridedMatrices s;
  s.data = t.raw();
  s.dtype = t.dtype();
  s.rows = 1;
  s.cols = t.numel();
  s.row_stride = t.numel();
  s.col_stride = 1;
  return s;
}

// c = alpha · a·b (+ c if accumulate) (+ bias on every row), for every entry
// of the batch dimensions: cuBLASLt runs one strided batch, the host loops
// over the other.
void matmul(const ExecContext& ec, const StridedMatrices& a, const StridedMatrices& b,
            const StridedMatrices& c, const Tensor* bias, float alpha, bool accumulate) {
  WEFT_CHECK(c.col_stride == 1, "gemm output needs dense rows, got column stride {}", c.col_stride);
  // cuBLASLt has no f32 product with a bf16 output: the product goes to a
  // dense f32 buffer and is rounded into c once.
  if (a.dtype == DType::f32 && c.dtype == DType::bf16) {
    StridedMatrices wide = c;
    wide.dtype = DType::f32;
    wide.row_stride = c.cols;
    wide.batch_stride[1] = c.rows * c.cols;
    wide.batch_stride[0] = c.batch[1] * wide.batch_stride[1];
    const Tensor buffer = ec.empty({c.batch[0] * wide.batch_stride[0]}, DType::f32);
    wide.data = buffer.raw();
    if (accumulate) cuda::convert_matrices(ec, c, wide, nullptr, DType::f32);
    matmul(ec, a, b, wide, bias, alpha, accumulate);
    cuda::convert_matrices(ec, wide, c, nullptr, DType::f32);
    return;
  }
  // One batch dimension goes to cuBLASLt: the inner one, or the outer one
  // when the inner is trivial.
  const bool inner = c.batch[1] > 1;
  const int outer_dim = inner ? 0 : 1, batch_dim = inner ? 1 : 0;
  const int64_t outer = c.batch[outer_dim];
  auto layout = [&](const StridedMatrices& s) {
    return layout_of(s, s.batch[batch_dim], s.batch_stride[batch_dim],
                     outer > 1 ? s.batch_stride[outer_dim] : 0);
  };
  Problem p;
  p.device = ec.device().index;
  p.a = layout(b);
  p.b = layout(a);
  p.c = layout(c);
  // cuBLASLt's bias epilogue takes a bias of the output's type: an f32 bias
  // (weft's masters) for a bf16 output is rounded to bf16 first (n elements,
  // on the stream, as frameworks keep bf16 biases), so that the bias is added
  // in the epilogue, before the output's one rounding, instead of in a pass
  // over the whole output after it.
  Tensor bias_rounded;
  if (bias && bias->dtype() == DType::f32 && c.dtype == DType::bf16) {
    bias_rounded = ec.empty({bias->numel()}, DType::bf16);
    cuda::convert_matrices(ec, vector_of(*bias), vector_of(bias_rounded), nullptr, DType::f32);
    bias = &bias_rounded;
  }
  const bool epilogue_types =
      bias && bias->dtype() == c.dtype && reinterpret_cast<uintptr_t>(bias->raw()) % 16 == 0;
  if (epilogue_types) {
    p.bias = 1 + cuda_type(bias->dtype());
    p.bias_alignment = alignment({reinterpret_cast<uintptr_t>(bias->raw())});
  }

  const weft::cuda::DeviceGuard on_device(p.device);
  Plan& plan = plan_for(p);
  if (plan.bias_epilogue) {
    const void* bias_ptr = bias->raw();
    check(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr,
                                         sizeof(bias_ptr)),
          "cublasLtMatmulDescSetAttribute(BIAS_POINTER)", p);
  }
  if (!plan.tuned) tune(plan, ec, p, a.data, b.data, alpha);
  const Workspace workspace(ec, plan.workspace);
  const float beta = accumulate ? 1.0f : 0.0f;
  const auto es_a = static_cast<int64_t>(dtype_storage_bytes(a.dtype, 1));
  const auto es_c = static_cast<int64_t>(dtype_storage_bytes(c.dtype, 1));
  for (int64_t i = 0; i < outer; ++i) {
    const auto* pa = static_cast<const char*>(a.data) + i * a.batch_stride[outer_dim] * es_a;
    const auto* pb = static_cast<const char*>(b.data) + i * b.batch_stride[outer_dim] * es_a;
    auto* pc = static_cast<char*>(c.data) + i * c.batch_stride[outer_dim] * es_c;
    check(cublasLtMatmul(plan.handle, plan.desc, &alpha, pb, plan.a, pa, plan.b, &beta, pc, plan.c,
                         pc, plan.c, &plan.algo, workspace.ptr, plan.workspace,
                         static_cast<cudaStream_t>(ec.stream())),
          "cublasLtMatmul", p);
  }
  if (bias && !plan.bias_epilogue) cuda::convert_matrices(ec, c, c, bias->raw(), bias->dtype());
}

StridedMatrices matrix(const Tensor& t, bool transposed) {
  StridedMatrices s;
  const int64_t r = t.shape().rows(), c = t.shape().last();
  s.data = t.raw();
  s.dtype = t.dtype();
  s.rows = transposed ? c : r;
  s.cols = transposed ? r : c;
  s.row_stride = transposed ? 1 : c;
  s.col_stride = transposed ? c : 1;
  return s;
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

// The alignment of a fresh allocation (the caching allocator hands out
// 512-byte multiples of cudaMalloc's 256-byte aligned memory): the rounded
// bias and the bias gradient's scratch vector.
constexpr int64_t kFreshAlignment = 256;

// A GemmEpilogue call as one cuBLASLt problem (kernels/gemm.cpp has checked
// the arguments; not f32 operands for a bf16 output): false where the layout
// rules of cuBLASLt's epilogues rule it out (it then runs unfused).
//
// cuBLASLt computes weft's row-major c (m, n) = op(a)·op(b) as the
// column-major D (n x m) = op(b)ᵀ·op(a)ᵀ: its A is weft's b, its B weft's a,
// and D's rows are c's columns. So cuBLASLt's bias vector, which runs along
// D's rows (length "M" in cuBLASLt's terms), is weft's bias over c's n
// columns, and the DGELU_BGRAD gradient is the column sums of c; the aux
// matrix is laid out as D (leading dimension n); and the gradient that sums
// weft's a over k (the wgrad GEMM's db) is BGRADB, cuBLASLt's B being a, its
// length D's column count m (BGRADA would sum weft's b).
bool epilogue_problem(const ExecContext& ec, const Tensor& a, const Tensor& b, const Tensor& c,
                      const GemmOptions& opt, Problem& p) {
  const StridedMatrices sa = matrix(a, opt.trans_a), sb = matrix(b, opt.trans_b),
                        sc = matrix(c, false);
  const int64_t n = sc.cols;
  p.device = ec.device().index;
  p.a = layout_of(sb, 1, 0, 0);
  p.b = layout_of(sa, 1, 0, 0);
  p.c = layout_of(sc, 1, 0, 0);
  const int64_t own_type = 1 + cuda_type(c.dtype());
  auto with_aux = [&] {
    // AUX_LD must be a multiple of 8 (cublasLt.h); the aux buffer is c's
    // twin, dense rows of n.
    if (n % 8 != 0 || !aligned16(opt.aux->raw())) return false;
    p.aux_ld = n;
    p.aux_alignment = alignment({reinterpret_cast<uintptr_t>(opt.aux->raw())});
    return true;
  };
  switch (opt.epilogue) {
    case GemmEpilogue::none: return false;
    case GemmEpilogue::gelu_aux:
      if (!with_aux()) return false;
      p.epilogue = opt.bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
      if (opt.bias) {
        // The bias in the output's type (as the BIAS epilogue): an f32 bias
        // of a bf16 output is rounded into a fresh buffer per call.
        if (opt.bias->dtype() == c.dtype()) {
          if (!aligned16(opt.bias->raw())) return false;
          p.bias_alignment = alignment({reinterpret_cast<uintptr_t>(opt.bias->raw())});
        } else if (opt.bias->dtype() == DType::f32 && c.dtype() == DType::bf16) {
          p.bias_alignment = kFreshAlignment;
        } else {
          return false;  // a bf16 bias of an f32 output: added after the product
        }
        p.bias = own_type;
      }
      return true;
    case GemmEpilogue::dgelu_bgrad:
      if (!with_aux()) return false;
      p.epilogue = opt.bias_grad ? CUBLASLT_EPILOGUE_DGELU_BGRAD : CUBLASLT_EPILOGUE_DGELU;
      if (opt.bias_grad) {
        // The bias gradient has the output's type (cublasLt.h) and is
        // overwritten: it goes to scratch and is added to bias_grad.
        p.bias = own_type;
        p.bias_alignment = kFreshAlignment;
      }
      return true;
    case GemmEpilogue::bgrad_a:
      p.epilogue = CUBLASLT_EPILOGUE_BGRADB;
      p.bias = own_type;
      p.bias_alignment = kFreshAlignment;
      return true;
  }
  return false;
}

}  // namespace

template <>
bool gemm_epilogue_fused<Backend::cuda>(const ExecContext& ec, const Tensor& a, const Tensor& b,
                                        const Tensor& c, const GemmOptions& opt) {
  Problem p;
  if (!epilogue_problem(ec, a, b, c, opt, p)) return false;
  const weft::cuda::DeviceGuard on_device(p.device);
  return !plan_for(p).refused;
}

template <>
bool gemm_epilogue<Backend::cuda>(const ExecContext& ec, const Tensor& a, const Tensor& b,
                                  Tensor& c, const GemmOptions& opt) {
  Problem p;
  if (!epilogue_problem(ec, a, b, c, opt, p)) return false;
  const weft::cuda::DeviceGuard on_device(p.device);
  Plan& plan = plan_for(p);
  if (plan.refused) return false;
  auto set_pointer = [&](cublasLtMatmulDescAttributes_t attr, const void* ptr, const char* what) {
    check(cublasLtMatmulDescSetAttribute(plan.desc, attr, &ptr, sizeof(ptr)), what, p);
  };
  // The bias (GELU_AUX_BIAS) in c's type, or the bias gradient's scratch.
  Tensor bias_rounded, bias_grad;
  if (opt.bias) {
    const void* bias_ptr = opt.bias->raw();
    if (opt.bias->dtype() != c.dtype()) {
      bias_rounded = ec.empty({opt.bias->numel()}, c.dtype());
      cuda::convert_matrices(ec, vector_of(*opt.bias), vector_of(bias_rounded), nullptr,
                             DType::f32);
      bias_ptr = bias_rounded.raw();
    }
    set_pointer(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias_ptr,
                "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
  }
  if (opt.bias_grad) {
    bias_grad = ec.empty({opt.bias_grad->numel()}, c.dtype());
    set_pointer(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias_grad.raw(),
                "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
  }
  if (p.aux_ld != 0) {
    set_pointer(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, opt.aux->raw(),
                "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_POINTER)");
  }
  if (!plan.tuned) tune(plan, ec, p, a.raw(), b.raw(), opt.alpha);
  if (plan.refused) return false;
  const Workspace workspace(ec, plan.workspace);
  const float beta = opt.accumulate ? 1.0f : 0.0f;
  const cublasStatus_t status =
      cublasLtMatmul(plan.handle, plan.desc, &opt.alpha, b.raw(), plan.a, a.raw(), plan.b, &beta,
                     c.raw(), plan.c, c.raw(), plan.c, &plan.algo, workspace.ptr, plan.workspace,
                     static_cast<cudaStream_t>(ec.stream()));
  if (status != CUBLAS_STATUS_SUCCESS) {
    // Refused at run time (nothing was enqueued): remembered, and this call
    // runs unfused.
    plan.refused = true;
    return false;
  }
  if (opt.bias_grad) {
    // bias_grad (f32) += the scratch gradient (c's type), on the stream.
    const StridedMatrices g = vector_of(*opt.bias_grad);
    cuda::convert_matrices(ec, g, g, bias_grad.raw(), c.dtype());
  }
  return true;
}

template <>
void gemm<Backend::cuda>(const ExecContext& ec, const Tensor& a, const Tensor& b, Tensor& c,
                         const GemmOptions& opt) {
  const StridedMatrices sa = matrix(a, opt.trans_a), sb = matrix(b, opt.trans_b),
                        sc = matrix(c, false);
  const int64_t m = sa.rows, k = sa.cols, n = sb.cols;
  if (opt.bias) {
    WEFT_CHECK(opt.bias->dtype() == DType::f32 || opt.bias->dtype() == DType::bf16,
               "gemm bias must be f32 or bf16, got {}", dtype_name(opt.bias->dtype()));
  }
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!opt.accumulate) c.zero();
    return;
  }
  matmul(ec, sa, sb, sc, opt.bias, opt.alpha, opt.accumulate);
}

// FP8: cuBLASLt's A is weft's b (its op T: B's rows run along k), B is weft's
// a (op N); the scale-inverses are device pointers, set on the descriptor
// for each call (plans are per thread).
template <>
void quantized_gemm<Backend::cuda>(const ExecContext& ec, const QuantizedOperand& a,
                                   const QuantizedOperand& b, Tensor& c,
                                   const QuantizedGemmOptions& opt) {
  const Tensor& da = a.columnwise ? a.q->col_data : a.q->data;
  const Tensor& db = b.columnwise ? b.q->col_data : b.q->data;
  const Tensor& sa = a.columnwise ? a.q->col_scale_inv : a.q->scale_inv;
  const Tensor& sb = b.columnwise ? b.q->col_scale_inv : b.q->scale_inv;
  const int64_t m = a.rows(), n = b.rows(), k = a.cols();
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!opt.accumulate) c.zero();
    return;
  }
  const StridedMatrices ma = matrix(da, false), mb = matrix(db, true), mc = matrix(c, false);
  Problem p;
  p.device = ec.device().index;
  p.a = layout_of(mb, 1, 0, 0);
  p.b = layout_of(ma, 1, 0, 0);
  p.c = layout_of(mc, 1, 0, 0);
  p.fast_accumulation = opt.fast_accumulation ? 1 : 0;
  const weft::cuda::DeviceGuard on_device(p.device);
  Plan& plan = plan_for(p);
  const void* scale_a = sb.raw();  // cuBLASLt's A is weft's b
  const void* scale_b = sa.raw();
  check(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale_a,
                                       sizeof(scale_a)),
        "cublasLtMatmulDescSetAttribute(A_SCALE_POINTER)", p);
  check(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale_b,
                                       sizeof(scale_b)),
        "cublasLtMatmulDescSetAttribute(B_SCALE_POINTER)", p);
  if (!plan.tuned) tune(plan, ec, p, da.raw(), db.raw(), opt.alpha);
  const Workspace workspace(ec, plan.workspace);
  const float beta = opt.accumulate ? 1.0f : 0.0f;
  check(cublasLtMatmul(plan.handle, plan.desc, &opt.alpha, db.raw(), plan.a, da.raw(), plan.b,
                       &beta, c.raw(), plan.c, c.raw(), plan.c, &plan.algo, workspace.ptr,
                       plan.workspace, static_cast<cudaStream_t>(ec.stream())),
        "cublasLtMatmul", p);
}

template <>
void batched_gemm<Backend::cuda>(const ExecContext& ec, const StridedMatrices& a,
                                 const StridedMatrices& b, const StridedMatrices& c, float alpha,
                                 bool accumulate) {
  if (c.rows == 0 || c.cols == 0 || c.batch[0] == 0 || c.batch[1] == 0) return;
  WEFT_CHECK(a.cols > 0, "batched gemm with an empty inner dimension is not supported");
  matmul(ec, a, b, c, nullptr, alpha, accumulate);
}

template <>
int64_t plans_created<Backend::cuda>() {
  return cache().created;
}

}  // namespace weft::kernels::impl
