#include "direct_gemm.h"

#include <omp.h>

#include <algorithm>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>

#include "timing.h"
#include "weft/core/exec_context.h"
#include "weft/core/threads.h"
#include "weft/kernels/cpu_support.h"

namespace weft {

namespace {

dnnl::memory::data_type onednn_type(DType t) {
  return t == DType::f32 ? dnnl::memory::data_type::f32 : dnnl::memory::data_type::bf16;
}

}  // namespace

std::vector<GemmShape> layer_gemms(int64_t tokens, int64_t c) {
  struct Layer {
    const char* name;
    int64_t in, out;
  };
  const Layer layers[] = {{"qkv", c, 3 * c}, {"proj", c, c}, {"fc1", c, 4 * c}, {"fc2", 4 * c, c}};
  std::vector<GemmShape> rows;
  for (const Layer& l : layers) {
    rows.push_back({l.name, "fwd", tokens, l.out, l.in, false, true});
    rows.push_back({l.name, "dgrad", tokens, l.in, l.out, false, false});
    rows.push_back({l.name, "wgrad", l.out, l.in, tokens, true, false});
  }
  return rows;
}

std::vector<GemmShape> head_gemms(int64_t tokens, int64_t c, int64_t vocab) {
  return {{"head", "fwd", tokens, vocab, c, false, true},
          {"head", "dgrad", tokens, c, vocab, false, false},
          {"head", "wgrad", vocab, c, tokens, true, false}};
}

struct DirectGemm::Impl {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  dnnl::matmul prim;
  std::unordered_map<int, dnnl::memory> args;
};

DirectGemm::DirectGemm(const GemmShape& r, DType in, DType out, void* a, void* b, void* c,
                       bool accumulate)
    : impl_(std::make_unique<Impl>()) {
  using dnnl::memory;
  memory::desc a_md({r.m, r.k}, onednn_type(in),
                    r.trans_a ? memory::dims{1, r.m} : memory::dims{r.k, 1});
  memory::desc b_md({r.k, r.n}, onednn_type(in),
                    r.trans_b ? memory::dims{1, r.k} : memory::dims{r.n, 1});
  memory::desc c_md({r.m, r.n}, onednn_type(out), memory::dims{r.n, 1});
  dnnl::primitive_attr attr;
  if (accumulate) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  dnnl::matmul::primitive_desc pd({a_md, b_md, c_md}, attr, impl_->eng);
  impl_->prim = dnnl::matmul(pd);
  impl_->args = {{DNNL_ARG_SRC, memory(a_md, impl_->eng, a)},
                 {DNNL_ARG_WEIGHTS, memory(b_md, impl_->eng, b)},
                 {DNNL_ARG_DST, memory(c_md, impl_->eng, c)}};
}

DirectGemm::~DirectGemm() = default;

void DirectGemm::run() {
  impl_->prim.execute(impl_->strm, impl_->args);
  impl_->strm.wait();
}

struct LayerGemmProbe::Call {
  Tensor a, b, c;
  std::unique_ptr<DirectGemm> gemm;
};

LayerGemmProbe::LayerGemmProbe(DType dtype, int64_t tokens, int64_t width) {
  // oneDNN fixes a primitive's thread count when it creates it: create them
  // on the team seconds() runs them on.
  const int team = omp_get_max_threads();
  omp_set_num_threads(num_threads());
  const DType in = dtype == DType::bf16 && !kernels::cpu_support().native_bf16 ? DType::f32 : dtype;
  const ExecContext& ec = ExecContext::host();
  for (const GemmShape& r : layer_gemms(tokens, width)) {
    const bool wgrad = std::string(r.op) == "wgrad";
    auto call = std::make_unique<Call>();
    call->a = r.trans_a ? ec.empty({r.k, r.m}, in) : ec.empty({r.m, r.k}, in);
    call->b = r.trans_b ? ec.empty({r.n, r.k}, in) : ec.empty({r.k, r.n}, in);
    call->c = ec.zeros({r.m, r.n}, wgrad ? DType::f32 : in);
    call->a.fill(0.01f);
    call->b.fill(0.02f);
    call->gemm = std::make_unique<DirectGemm>(r, in, call->c.dtype(), call->a.raw(), call->b.raw(),
                                              call->c.raw(), wgrad);
    flops_ += 2.0 * static_cast<double>(r.m) * static_cast<double>(r.n) * static_cast<double>(r.k);
    calls_.push_back(std::move(call));
  }
  for (auto& c : calls_) c->gemm->run();  // primitive creation, first touch
  omp_set_num_threads(team);
}

LayerGemmProbe::~LayerGemmProbe() = default;

// oneDNN runs on the calling thread's OpenMP team, which weft's kernels size
// to the rank's share of the cores (kernels/cpu/onednn.cpp): the probe sizes
// it to num_threads() (all cores, as bench step calls it) and puts it back,
// so that the rank's own kernels keep their share.
double LayerGemmProbe::seconds() {
  const int before = omp_get_max_threads();
  omp_set_num_threads(num_threads());
  const double s = bench::seconds([&] {
    for (auto& c : calls_) c->gemm->run();
  });
  omp_set_num_threads(before);
  return s;
}

double direct_layer_gflops(DType dtype, int64_t tokens, int64_t width, int rounds) {
  LayerGemmProbe probe(dtype, tokens, width);
  auto layer = [&] { return probe.seconds(); };
  return probe.flops() / bench::best(bench::alternate(std::max(1, rounds), {layer})[0]) / 1e9;
}

}  // namespace weft
