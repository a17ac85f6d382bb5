#include "weft/kernels/cuda/gemm_plan.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "weft/core/cuda/device_guard.h"

namespace weft::kernels::impl::lt {

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

}  // namespace

void check(cublasStatus_t status, const char* call, const Problem& p) {
  WEFT_CHECK(status == CUBLAS_STATUS_SUCCESS, "{} failed for a {}: {}", call, p.describe(),
             cublasLtGetStatusString(status));
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

int64_t plans_created_here() { return cache().created; }

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

namespace {

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

}  // namespace

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

}  // namespace weft::kernels::impl::lt
