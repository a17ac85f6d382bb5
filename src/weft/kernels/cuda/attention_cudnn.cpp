// cuDNN's fused attention (attention_cudnn.h). This is the only file that
// includes the cuDNN frontend: its headers are heavy, and a build without
// them compiles the short branch at the bottom, which says why the path is off.
#include "weft/kernels/cuda/attention_cudnn.h"

#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string_view>

#include "weft/core/error.h"

#if WEFT_HAVE_CUDNN_FRONTEND
#include <cuda_runtime.h>
#include <cudnn_frontend.h>
#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "weft/core/cuda/device_guard.h"

// The frontend's calls into cuDNN go through this handle of the library,
// which weft opens itself (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING).
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend
#endif

namespace weft::kernels::cuda {

#if WEFT_HAVE_CUDNN_FRONTEND

namespace {

namespace fe = cudnn_frontend;

// WEFT_CUDNN=off (or 0) turns the path off for the process.
bool off_by_environment() {
  static const bool off = [] {
    const char* v = std::getenv("WEFT_CUDNN");
    return v != nullptr && (std::string_view(v) == "off" || std::string_view(v) == "0");
  }();
  return off;
}

// The shape rules of attention_cudnn.h, apart from the library and alignment.
bool shape_taken(const detail::AttentionDims& d, DType dt, const AttentionConfig& cfg) {
  return cfg.cudnn && dt == DType::bf16 && cfg.dropout == 0.0f && d.D % 8 == 0 && d.D <= 128 &&
         (d.Hkv == d.H || d.Hkv == 1);
}

bool aligned(std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors) {
    if (reinterpret_cast<uintptr_t>(t->raw()) % 16 != 0) return false;
  }
  return true;
}

struct Library {
  bool loaded = false;
  std::string status;
};

// Opens libcudnn.so.9 once per process.
const Library& library() {
  static const Library lib = [] {
    Library l;
    void* h = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) h = dlopen("libcudnn.so", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* why = dlerror();
      l.status = fmt::format(
          "off: cannot load libcudnn.so.9 ({}); install cuDNN 9 or put the folder holding it "
          "on LD_LIBRARY_PATH",
          why != nullptr ? why : "not found");
      return l;
    }
    using GetVersion = size_t (*)();
    auto get_version = reinterpret_cast<GetVersion>(dlsym(h, "cudnnGetVersion"));
    if (get_version == nullptr) {
      l.status = "off: the libcudnn.so found has no cudnnGetVersion";
      return l;
    }
    const size_t v = get_version();  // major·10000 + minor·100 + patch
    if (v < 90000) {
      l.status = fmt::format("off: cuDNN {}.{}.{} found, weft's attention needs cuDNN 9", v / 1000,
                             v / 100 % 10, v % 100);
      return l;
    }
    fe::cudnn_dlhandle = h;
    l.loaded = true;
    l.status = fmt::format("cuDNN {}.{}.{} (frontend {}.{}.{})", v / 10000, v / 100 % 100, v % 100,
                           CUDNN_FRONTEND_MAJOR_VERSION, CUDNN_FRONTEND_MINOR_VERSION,
                           CUDNN_FRONTEND_PATCH_VERSION);
    return l;
  }();
  return lib;
}

// The tensors of a graph's variant pack.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

// One built graph, or the reason cuDNN refused its shape.
struct Entry {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspace = 0;
  std::string refusal;
};

// (backward, B, T, H, Hkv, D, sequence-major, causal)
using Key = std::tuple<bool, int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool>;

// A device's handle and graphs. Execution holds the mutex: the handle's
// stream is set for each call.
struct DeviceState {
  std::mutex mutex;
  cudnnHandle_t handle = nullptr;
  std::map<Key, Entry> graphs;
};

DeviceState& device_state(int device) {
  // Never destroyed: handles and plans outlive every thread that uses them,
  // and destroying them after the CUDA runtime has shut down would fail.
  static std::mutex* mutex = new std::mutex;
  static auto* states = new std::map<int, std::unique_ptr<DeviceState>>;
  std::lock_guard<std::mutex> lock(*mutex);
  auto& s = (*states)[device];
  if (!s) s = std::make_unique<DeviceState>();
  return *s;
}

struct Refused {
  std::string why;
};

void check(fe::error_t e, const char* step) {
  if (e.is_bad()) throw Refused{fmt::format("{}: {}", step, e.get_message())};
}

void check_cudnn(cudnnStatus_t status, const char* step) {
  if (status != CUDNN_STATUS_SUCCESS) {
    throw Refused{fmt::format("{}: {}", step, fe::detail::get_error_string(status))};
  }
}

// Strides of a (B, heads, T, D) view of an activation of `width` columns.
std::vector<int64_t> strides(const detail::AttentionDims& d, int64_t width) {
  return {d.batch_rows() * width, d.D, d.position_rows() * width, 1};
}

std::shared_ptr<fe::graph::Graph> new_graph() {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

TensorPtr input(fe::graph::Graph& g, const char* name, Uid uid, std::vector<int64_t> dim,
                std::vector<int64_t> stride) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim(std::move(dim))
                      .set_stride(std::move(stride)));
}

void output(const TensorPtr& t, Uid uid, std::vector<int64_t> dim, std::vector<int64_t> stride) {
  t->set_output(true).set_uid(uid).set_dim(std::move(dim)).set_stride(std::move(stride));
}

Entry build(cudnnHandle_t handle, const detail::AttentionDims& d, const AttentionConfig& cfg,
            bool backward) {
  auto g = new_graph();
  const auto qs = strides(d, d.width()), os = strides(d, d.C);
  const std::vector<int64_t> q_dim{d.B, d.H, d.T, d.D}, kv_dim{d.B, d.Hkv, d.T, d.D};
  const std::vector<int64_t> stats_dim{d.B, d.H, d.T, 1}, stats_stride{d.H * d.T, d.T, 1, 1};
  auto q = input(*g, "Q", kQ, q_dim, qs);
  auto k = input(*g, "K", kK, kv_dim, qs);
  auto v = input(*g, "V", kV, kv_dim, qs);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.D));
  if (!backward) {
    auto opts = fe::graph::SDPA_attributes()
                    .set_name("weft_attention")
                    .set_generate_stats(true)
                    .set_causal_mask(cfg.causal)
                    .set_attn_scale(scale);
    auto [o, stats] = g->sdpa(q, k, v, opts);
    output(o, kO, q_dim, os);
    output(stats, kStats, stats_dim, stats_stride);
    stats->set_data_type(fe::DataType_t::FLOAT);
  } else {
    auto o = input(*g, "O", kO, q_dim, os);
    auto dout = input(*g, "dO", kDO, q_dim, os);
    auto stats = input(*g, "Stats", kStats, stats_dim, stats_stride);
    stats->set_data_type(fe::DataType_t::FLOAT);
    // Deterministic: a run repeats bit for bit, as weft's own kernels do.
    auto opts = fe::graph::SDPA_backward_attributes()
                    .set_name("weft_attention_backward")
                    .set_causal_mask(cfg.causal)
                    .set_attn_scale(scale)
                    .set_deterministic_algorithm(true);
    auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dout, stats, opts);
    output(dq, kDQ, q_dim, qs);
    output(dk, kDK, kv_dim, qs);
    output(dv, kDV, kv_dim, qs);
  }
  check(g->validate(), "validate");
  check(g->build_operation_graph(handle), "build_operation_graph");
  check(g->create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans");
  check(g->check_support(handle), "check_support");
  check(g->build_plans(), "build_plans");
  Entry e;
  check(g->get_workspace_size(e.workspace), "get_workspace_size");
  e.graph = std::move(g);
  return e;
}

const char* direction(bool backward) { return backward ? "backward" : "forward"; }

// Runs the graph of this call's shape on ec's stream with `pack`; false where
// cuDNN refuses the shape (said once on stderr).
bool run(const ExecContext& ec, const detail::AttentionDims& d, const AttentionConfig& cfg,
         bool backward, std::unordered_map<int64_t, void*>& pack, AttentionWorkspace& workspace) {
  const int device = ec.device().index;
  weft::cuda::DeviceGuard guard(device, "cuDNN attention");
  DeviceState& s = device_state(device);
  std::lock_guard<std::mutex> lock(s.mutex);
  const Key key{backward, d.B, d.T, d.H, d.Hkv, d.D, d.sequence_major, cfg.causal};
  auto it = s.graphs.find(key);
  if (it == s.graphs.end()) {
    Entry e;
    try {
      if (s.handle == nullptr) check_cudnn(fe::detail::create_handle(&s.handle), "cudnnCreate");
      e = build(s.handle, d, cfg, backward);
    } catch (const Refused& r) {
      e.refusal = r.why;
    } catch (const std::exception& x) {
      e.refusal = x.what();
    }
    if (!e.graph) {
      std::fprintf(stderr,
                   "weft: cuDNN refused attention %s for B=%lld T=%lld H=%lld Hkv=%lld D=%lld "
                   "(%s); weft's own kernels run it\n",
                   direction(backward), static_cast<long long>(d.B), static_cast<long long>(d.T),
                   static_cast<long long>(d.H), static_cast<long long>(d.Hkv),
                   static_cast<long long>(d.D), e.refusal.c_str());
    }
    it = s.graphs.emplace(key, std::move(e)).first;
  }
  const Entry& e = it->second;
  if (!e.graph) return false;
  if (e.workspace > 0 && (!workspace.buffer.defined() || workspace.buffer.nbytes() < e.workspace)) {
    workspace.buffer = ec.empty({e.workspace}, DType::u8);
  }
  void* ws = e.workspace > 0 ? workspace.buffer.raw() : nullptr;
  const cudnnStatus_t set =
      fe::detail::set_stream(s.handle, static_cast<cudaStream_t>(ec.stream()));
  WEFT_CHECK(set == CUDNN_STATUS_SUCCESS, "cuDNN attention {}: cudnnSetStream failed: {}",
             direction(backward), fe::detail::get_error_string(set));
  fe::error_t status = e.graph->execute(s.handle, pack, ws);
  WEFT_CHECK(status.is_good(), "cuDNN attention {} failed: {}", direction(backward),
             status.get_message());
  return true;
}

}  // namespace

bool cudnn_attention_takes(const detail::AttentionDims& d, DType dt, const AttentionConfig& cfg,
                           std::initializer_list<const Tensor*> tensors) {
  return shape_taken(d, dt, cfg) && !off_by_environment() && aligned(tensors) && library().loaded;
}

bool cudnn_attention_forward(const ExecContext& ec, const Tensor& qkv,
                             const detail::AttentionDims& d, const AttentionConfig& cfg,
                             Tensor& out, Tensor& lse, AttentionWorkspace& workspace) {
  auto* base = static_cast<uint16_t*>(qkv.raw());
  std::unordered_map<int64_t, void*> pack{{kQ, base},
                                          {kK, base + d.part_column(1)},
                                          {kV, base + d.part_column(2)},
                                          {kO, out.raw()},
                                          {kStats, lse.raw()}};
  return run(ec, d, cfg, false, pack, workspace);
}

bool cudnn_attention_backward(const ExecContext& ec, const Tensor& dout, const Tensor& qkv,
                              const AttentionSaved& saved, const detail::AttentionDims& d,
                              const AttentionConfig& cfg, Tensor& dqkv,
                              AttentionWorkspace& workspace) {
  auto* base = static_cast<uint16_t*>(qkv.raw());
  auto* grad = static_cast<uint16_t*>(dqkv.raw());
  std::unordered_map<int64_t, void*> pack{{kQ, base},
                                          {kK, base + d.part_column(1)},
                                          {kV, base + d.part_column(2)},
                                          {kO, saved.out.raw()},
                                          {kDO, dout.raw()},
                                          {kStats, saved.lse.raw()},
                                          {kDQ, grad},
                                          {kDK, grad + d.part_column(1)},
                                          {kDV, grad + d.part_column(2)}};
  return run(ec, d, cfg, true, pack, workspace);
}

std::string cudnn_attention_status() {
  if (off_by_environment()) return "off: WEFT_CUDNN=off";
  return library().status;
}

#else  // no cuDNN frontend in this build

bool cudnn_attention_takes(const detail::AttentionDims&, DType, const AttentionConfig&,
                           std::initializer_list<const Tensor*>) {
  return false;
}
bool cudnn_attention_forward(const ExecContext&, const Tensor&, const detail::AttentionDims&,
                             const AttentionConfig&, Tensor&, Tensor&, AttentionWorkspace&) {
  return false;
}
bool cudnn_attention_backward(const ExecContext&, const Tensor&, const Tensor&,
                              const AttentionSaved&, const detail::AttentionDims&,
                              const AttentionConfig&, Tensor&, AttentionWorkspace&) {
  return false;
}
std::string cudnn_attention_status() {
  return "off: this build has no cuDNN frontend headers (scripts/install-deps.sh fetches them; "
         "or configure with -DWEFT_CUDNN_FRONTEND_DIR=<its include folder>)";
}

#endif

}  // namespace weft::kernels::cuda
