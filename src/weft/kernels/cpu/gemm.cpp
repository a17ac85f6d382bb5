#include "weft/kernels/impl/gemm.h"

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "weft/core/exec_context.h"
#include "weft/core/profile.h"
#include "weft/kernels/cast.h"
#include "weft/kernels/cpu/onednn.h"

namespace weft::kernels::impl {

namespace {

using dnnl::memory;

// One operand as oneDNN sees it: up to 4 dims with strides (elements).
struct Operand {
  int ndims = 2;
  std::array<int64_t, 4> dims{};
  std::array<int64_t, 4> strides{};
  DType dtype = DType::f32;
  void* ptr = nullptr;
  // A packed operand (PackedWeight): its oneDNN layout; strides are unused.
  const memory::desc* layout = nullptr;

  memory::desc desc() const {
    if (layout) return *layout;
    memory::dims d(dims.begin(), dims.begin() + ndims);
    memory::dims s(strides.begin(), strides.begin() + ndims);
    return memory::desc(d, cpu::to_dnnl(dtype), s);
  }
};

// Everything that selects a primitive: shapes, strides, types, options, the
// thread count it was created for and, for a packed b, its plain operand.
using Key = std::array<int64_t, 4 * 9 + 6>;

struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = 1469598103934665603ull;
    for (int64_t v : k) h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

struct Entry {
  dnnl::matmul prim;
  memory a, b, c, bias, scratch;
  bool reads_plain_b = false;  // a packed b whose product reads the plain operand
};

struct Cache {
  std::unordered_map<Key, Entry, KeyHash> entries;
  int64_t created = 0;
};

Cache& cache() {
  thread_local Cache c;
  return c;
}

// One thread at a time creates a primitive: oneDNN's primitive cache hands a
// second thread asking for the same matmul (or reorder) the object the first
// one built, published inside libdnnl through synchronization that
// ThreadSanitizer cannot see (make test-tsan found the second thread's query
// of it as a race). Creation happens once per shape and thread.
std::mutex& creation_mutex() {
  static std::mutex m;
  return m;
}

void put(Key& key, size_t& i, const Operand& op) {
  // A packed operand: ndims 0 (no plain operand has it), then its dims.
  key[i++] = op.layout ? 0 : op.ndims;
  for (int d = 0; d < 4; ++d) key[i++] = op.dims[static_cast<size_t>(d)];
  for (int d = 0; d < 4; ++d) key[i++] = op.layout ? 0 : op.strides[static_cast<size_t>(d)];
}

// Whether the product of a packed b (its layout b.layout) gives what the
// plain b's gives, bit for bit: the same kernel, and a blocked layout that
// oneDNN would copy the plain b into for this shape.
bool packed_matches_plain(const dnnl::matmul::primitive_desc& packed,
                          const dnnl::matmul::primitive_desc& plain, const memory::desc& a,
                          const Operand& b, const memory::desc& c,
                          const dnnl::primitive_attr& attr) {
  const memory::desc any(memory::dims{b.dims[0], b.dims[1]}, cpu::to_dnnl(b.dtype),
                         memory::format_tag::any);
  const dnnl::matmul::primitive_desc chosen(dnnl::matmul::desc(a, any, c), attr, cpu::engine());
  return chosen.weights_desc() == *b.layout &&
         std::string(packed.impl_info_str()) == plain.impl_info_str() &&
         std::string(chosen.impl_info_str()) == plain.impl_info_str();
}

// Runs the primitive for these operands, creating and caching it on first use.
// bias (if any) is a vector of c's last dimension. A packed b (b.layout set)
// comes with `plain_b`, the same operand plain, which the product reads where
// the packed layout would not give the plain product bit for bit.
void execute_matmul(const ExecContext& ec, const Operand& a, const Operand& b, const Operand& c,
                    const Operand* bias, float alpha, bool accumulate,
                    const Operand* plain_b = nullptr) {
  const int threads = cpu::apply_thread_budget(ec);
  Key key{};
  size_t i = 0;
  put(key, i, a);
  put(key, i, b);
  put(key, i, c);
  if (plain_b) {
    put(key, i, *plain_b);
  } else {
    i += 9;
  }
  key[i++] = static_cast<int64_t>(a.dtype) | static_cast<int64_t>(b.dtype) << 8 |
             static_cast<int64_t>(c.dtype) << 16;
  key[i++] = bias ? 1 + static_cast<int64_t>(bias->dtype) : 0;
  key[i++] = accumulate;
  key[i++] = static_cast<int64_t>(f32_to_bits(alpha));
  key[i++] = threads;

  Cache& cc = cache();
  auto it = cc.entries.find(key);
  if (it == cc.entries.end()) {
    const std::lock_guard<std::mutex> lock(creation_mutex());
    try {
      memory::desc bias_md;
      if (bias) {
        memory::dims bd(static_cast<size_t>(c.ndims), 1);
        bd.back() = c.dims[static_cast<size_t>(c.ndims - 1)];
        memory::dims bs(static_cast<size_t>(c.ndims), bd.back());
        bs.back() = 1;
        bias_md = memory::desc(bd, cpu::to_dnnl(bias->dtype), bs);
      }
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      if (accumulate) {
        dnnl::post_ops po;
        po.append_sum(1.0f);
        attr.set_post_ops(po);
      }
      if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
      dnnl::matmul::desc desc(a.desc(), b.desc(), bias_md, c.desc());
      dnnl::matmul::primitive_desc pd(desc, attr, cpu::engine());
      Entry e;
      if (plain_b) {
        dnnl::matmul::primitive_desc plain(
            dnnl::matmul::desc(a.desc(), plain_b->desc(), bias_md, c.desc()), attr, cpu::engine());
        if (!packed_matches_plain(pd, plain, a.desc(), b, c.desc(), attr)) {
          pd = plain;
          e.reads_plain_b = true;
        }
      }
      e.prim = dnnl::matmul(pd);
      e.a = memory(pd.src_desc(), cpu::engine(), nullptr);
      e.b = memory(pd.weights_desc(), cpu::engine(), nullptr);
      e.c = memory(pd.dst_desc(), cpu::engine(), nullptr);
      if (bias) e.bias = memory(pd.bias_desc(), cpu::engine(), nullptr);
      e.scratch = memory(pd.scratchpad_desc(), cpu::engine());
      it = cc.entries.emplace(key, std::move(e)).first;
      ++cc.created;
    } catch (const dnnl::error& err) {
      WEFT_FAIL("oneDNN cannot build a matmul for {}x{} · {}x{} ({}): {}",
                a.dims[static_cast<size_t>(a.ndims - 2)], a.dims[static_cast<size_t>(a.ndims - 1)],
                b.dims[static_cast<size_t>(b.ndims - 2)], b.dims[static_cast<size_t>(b.ndims - 1)],
                dtype_name(a.dtype), err.what());
    }
  }
  Entry& e = it->second;
  e.a.set_data_handle(a.ptr);
  e.b.set_data_handle(e.reads_plain_b ? plain_b->ptr : b.ptr);
  e.c.set_data_handle(c.ptr);
  // A fixed argument array through the C API: the C++ execute() takes an
  // unordered_map, which would allocate on every call.
  dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, e.a.get()},
                             {DNNL_ARG_WEIGHTS, e.b.get()},
                             {DNNL_ARG_DST, e.c.get()},
                             {DNNL_ARG_SCRATCHPAD, e.scratch.get()},
                             {DNNL_ARG_BIAS, nullptr}};
  int nargs = 4;
  if (bias) {
    e.bias.set_data_handle(bias->ptr);
    args[4].memory = e.bias.get();
    nargs = 5;
  }
  dnnl_status_t st = dnnl_primitive_execute(e.prim.get(), cpu::stream().get(), nargs, args);
  WEFT_CHECK(st == dnnl_success, "oneDNN matmul failed with status {}", static_cast<int>(st));
  cpu::stream().wait();
}

// The operand's elements in their memory order, packed densely: `order` lists
// the dimensions from the largest stride to the smallest, and `dense` gives
// the strides of the packed copy, which keeps that order (a transposed operand
// stays transposed).
struct Packing {
  std::array<int, 4> order{};
  std::array<int64_t, 4> dense{};
  int64_t numel = 1;
};

Packing packing(const Operand& op) {
  Packing p;
  const auto nd = static_cast<size_t>(op.ndims);
  for (size_t d = 0; d < nd; ++d) p.order[d] = static_cast<int>(d);
  std::stable_sort(p.order.begin(), p.order.begin() + op.ndims, [&](int x, int y) {
    return op.strides[static_cast<size_t>(x)] > op.strides[static_cast<size_t>(y)];
  });
  for (size_t j = nd; j-- > 0;) {
    const auto d = static_cast<size_t>(p.order[j]);
    p.dense[d] = p.numel;
    p.numel *= op.dims[d];
  }
  return p;
}

// Calls f(offset, packed_offset, n, step) for every run along the innermost
// dimension: n elements at offset + k·step in the operand and packed_offset + k
// in its packed copy.
template <typename F>
void for_each_run(const ExecContext& ec, const Operand& op, const Packing& p, F&& f) {
  const int nd = op.ndims;
  const auto inner = static_cast<size_t>(p.order[static_cast<size_t>(nd - 1)]);
  const int64_t n = op.dims[inner], step = op.strides[inner];
  const int64_t outer = n == 0 ? 0 : p.numel / n;
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
  for (int64_t o = 0; o < outer; ++o) {
    int64_t rest = o, at = 0, packed = 0;
    for (int j = nd - 2; j >= 0; --j) {
      const auto d = static_cast<size_t>(p.order[static_cast<size_t>(j)]);
      const int64_t idx = rest % op.dims[d];
      rest /= op.dims[d];
      at += idx * op.strides[d];
      packed += idx * p.dense[d];
    }
    f(at, packed, n, step);
  }
}

// An f32 copy of a bf16 operand in staging buffer `slot` (its values only
// when `values`; an output that is overwritten needs just the layout).
Operand widened(const ExecContext& ec, const Operand& op, int slot, bool values) {
  const Packing p = packing(op);
  Operand w = op;
  w.dtype = DType::f32;
  w.strides = p.dense;
  auto* dst = cpu::staging(slot, p.numel);
  w.ptr = dst;
  if (values) {
    const auto* src = static_cast<const uint16_t*>(op.ptr);
    for_each_run(ec, op, p, [&](int64_t at, int64_t packed, int64_t n, int64_t step) {
      for (int64_t k = 0; k < n; ++k) dst[packed + k] = bf16_to_f32(src[at + k * step]);
    });
  }
  return w;
}

// Rounds the f32 copy made by widened() back into the bf16 operand.
void narrow_back(const ExecContext& ec, const Operand& w, const Operand& op) {
  const auto* src = static_cast<const float*>(w.ptr);
  auto* dst = static_cast<uint16_t*>(op.ptr);
  for_each_run(ec, op, packing(op), [&](int64_t at, int64_t packed, int64_t n, int64_t step) {
    for (int64_t k = 0; k < n; ++k) dst[at + k * step] = f32_to_bf16(src[packed + k]);
  });
}

// bf16 semantics without bf16 kernels: operands widened to f32 (exactly), the
// f32 matmul accumulating in f32, a bf16 output rounded once at the end — what
// a native bf16 matmul computes, up to the order of the f32 sums.
void emulated_matmul(const ExecContext& ec, const Operand& a, const Operand& b, const Operand& c,
                     const Operand* bias, float alpha, bool accumulate) {
  auto widen = [&](const Operand& op, int slot) {
    return op.dtype == DType::bf16 ? widened(ec, op, slot, true) : op;
  };
  const Operand wa = widen(a, 0), wb = widen(b, 1);
  Operand wbias;
  if (bias) wbias = widen(*bias, 3);
  if (c.dtype == DType::f32) {
    execute_matmul(ec, wa, wb, c, bias ? &wbias : nullptr, alpha, accumulate);
    return;
  }
  const Operand wc = widened(ec, c, 2, accumulate);
  execute_matmul(ec, wa, wb, wc, bias ? &wbias : nullptr, alpha, accumulate);
  narrow_back(ec, wc, c);
}

void run_matmul(const ExecContext& ec, const Operand& a, const Operand& b, const Operand& c,
                const Operand* bias, float alpha, bool accumulate) {
  profile::Scope timed(profile::Category::gemm);
  const bool bf16 = a.dtype == DType::bf16 || b.dtype == DType::bf16 || c.dtype == DType::bf16 ||
                    (bias && bias->dtype == DType::bf16);
  if (bf16 && cpu::emulate_bf16()) {
    emulated_matmul(ec, a, b, c, bias, alpha, accumulate);
  } else {
    execute_matmul(ec, a, b, c, bias, alpha, accumulate);
  }
}

// A (rows x cols) matrix stored row-major, optionally read transposed.
Operand matrix(const Tensor& t, bool transposed) {
  Operand op;
  int64_t r = t.shape().rows(), c = t.shape().last();
  op.dims = {transposed ? c : r, transposed ? r : c, 0, 0};
  op.strides = {transposed ? 1 : c, transposed ? c : 1, 0, 0};
  op.dtype = t.dtype();
  op.ptr = t.raw();
  return op;
}

}  // namespace

template <>
void gemm<Backend::cpu>(const ExecContext& ec, const Tensor& a, const Tensor& b, Tensor& c,
                        const GemmOptions& opt) {
  Operand oa = matrix(a, opt.trans_a), ob = matrix(b, opt.trans_b), oc = matrix(c, false);
  int64_t m = oa.dims[0], k = oa.dims[1], n = ob.dims[1];
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!opt.accumulate) c.zero();
    return;
  }
  Operand bias;
  if (opt.bias) {
    bias.ndims = 1;
    bias.dims = {n, 0, 0, 0};
    bias.strides = {1, 0, 0, 0};
    bias.dtype = opt.bias->dtype();
    bias.ptr = opt.bias->raw();
  }
  run_matmul(ec, oa, ob, oc, opt.bias ? &bias : nullptr, opt.alpha, opt.accumulate);
}

// The CPU runs every epilogue as the unfused sequence: oneDNN's GELU post-op
// was slower than the matmul and the GELU pass together, and it writes no
// pre-activation (nn/layernorm_mlp.cpp has the measurement).
template <>
bool gemm_epilogue<Backend::cpu>(const ExecContext&, const Tensor&, const Tensor&, Tensor&,
                                 const GemmOptions&) {
  return false;
}

template <>
bool gemm_epilogue_fused<Backend::cpu>(const ExecContext&, const Tensor&, const Tensor&,
                                       const Tensor&, const GemmOptions&) {
  return false;
}

template <>
void batched_gemm<Backend::cpu>(const ExecContext& ec, const StridedMatrices& a,
                                const StridedMatrices& b, const StridedMatrices& c, float alpha,
                                bool accumulate) {
  // Without batch dimensions, plain matrices: oneDNN takes 4-D operands whose
  // batch strides do not describe a dense tensor (zero, or anything for a
  // batch of one) to its reference kernel.
  const bool single = c.batch[0] == 1 && c.batch[1] == 1;
  auto operand = [single](const StridedMatrices& s) {
    Operand op;
    if (single) {
      op.ndims = 2;
      op.dims = {s.rows, s.cols, 0, 0};
      op.strides = {s.row_stride, s.col_stride, 0, 0};
    } else {
      op.ndims = 4;
      op.dims = {s.batch[0], s.batch[1], s.rows, s.cols};
      op.strides = {s.batch_stride[0], s.batch_stride[1], s.row_stride, s.col_stride};
    }
    op.dtype = s.dtype;
    op.ptr = s.data;
    return op;
  };
  if (c.rows == 0 || c.cols == 0 || c.batch[0] == 0 || c.batch[1] == 0) return;
  run_matmul(ec, operand(a), operand(b), operand(c), nullptr, alpha, accumulate);
}

// The exact emulation: each chosen copy dequantized to f32 in x's layout
// (kernels::dequantize puts a column-wise copy back in x's layout), then the
// f32 product with the transposes that make it A·Bᵀ.
template <>
void quantized_gemm<Backend::cpu>(const ExecContext& ec, const QuantizedOperand& a,
                                  const QuantizedOperand& b, Tensor& c,
                                  const QuantizedGemmOptions& opt) {
  Tensor fa = ec.empty({a.q->rows, a.q->cols}, DType::f32);
  Tensor fb = ec.empty({b.q->rows, b.q->cols}, DType::f32);
  kernels::dequantize(ec, *a.q, a.columnwise, fa);
  kernels::dequantize(ec, *b.q, b.columnwise, fb);
  // fa is A, or Aᵀ for a column-wise copy; fb is B, or Bᵀ.
  GemmOptions g;
  g.trans_a = a.columnwise;
  g.trans_b = !b.columnwise;
  g.accumulate = opt.accumulate;
  g.alpha = opt.alpha;
  if (c.dtype() == DType::f32) return gemm<Backend::cpu>(ec, fa, fb, c, g);
  // A bf16 output: the f32 product (plus c) rounded once, as a GPU's epilogue does.
  Tensor wide = opt.accumulate ? c.to(DType::f32) : ec.empty(c.shape(), DType::f32);
  gemm<Backend::cpu>(ec, fa, fb, wide, g);
  c.copy_from(wide.to(DType::bf16));
}

namespace {

// op(b) (k x n) of a bf16 b, plain: trans_b reads b (n, k) transposed.
Operand plain_b_operand(const Tensor& b, bool trans_b) { return matrix(b, trans_b); }

// The blocked layout oneDNN's bf16 matmul reads a (k x n) b in, or the
// plain layout where it reads b as it is; per thread, by shape.
const memory::desc& packed_layout(int64_t k, int64_t n) {
  thread_local std::map<std::pair<int64_t, int64_t>, memory::desc> layouts;
  auto it = layouts.find({k, n});
  if (it != layouts.end()) return it->second;
  // The layout depends on k and n (the product's shape decides only whether
  // it is used: packed_matches_plain); 128 rows stand for any.
  constexpr int64_t kRows = 128;
  const auto bf16 = memory::data_type::bf16;
  const memory::desc a({kRows, k}, bf16, memory::format_tag::ab);
  const memory::desc b({k, n}, bf16, memory::format_tag::any);
  const memory::desc c({kRows, n}, bf16, memory::format_tag::ab);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const std::lock_guard<std::mutex> lock(creation_mutex());
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, cpu::engine());
  return layouts.emplace(std::make_pair(k, n), pd.weights_desc()).first->second;
}

}  // namespace

bool pack_b_cpu(const ExecContext& ec, const Tensor& b, bool trans_b, Tensor& packed) {
  if (cpu::emulate_bf16()) return false;
  const Operand plain = plain_b_operand(b, trans_b);
  const memory::desc src = plain.desc();
  const memory::desc& layout = packed_layout(plain.dims[0], plain.dims[1]);
  if (layout == src) return false;
  const auto bytes = static_cast<int64_t>(layout.get_size());
  if (!packed.defined() || packed.nbytes() != bytes) {
    packed = ec.empty({bytes}, DType::u8, MemoryTag::weight_cache);
  }
  profile::Scope timed(profile::Category::gemm);
  cpu::apply_thread_budget(ec);
  try {
    // Reorders cached per thread, by shape and direction.
    thread_local std::map<std::array<int64_t, 3>, dnnl::reorder> reorders;
    const std::array<int64_t, 3> key{plain.dims[0], plain.dims[1], trans_b ? 1 : 0};
    auto it = reorders.find(key);
    if (it == reorders.end()) {
      const std::lock_guard<std::mutex> lock(creation_mutex());
      const dnnl::reorder::primitive_desc pd(cpu::engine(), src, cpu::engine(), layout);
      it = reorders.emplace(key, dnnl::reorder(pd)).first;
    }
    memory from(src, cpu::engine(), b.raw()), to(layout, cpu::engine(), packed.raw());
    it->second.execute(cpu::stream(), from, to);
    cpu::stream().wait();
  } catch (const dnnl::error& err) {
    WEFT_FAIL("oneDNN cannot pack a {}x{} bf16 weight: {}", plain.dims[0], plain.dims[1],
              err.what());
  }
  return true;
}

void gemm_packed_cpu(const ExecContext& ec, const Tensor& a, const Tensor& plain, bool trans_b,
                     const Tensor& packed, Tensor& c, const GemmOptions& opt) {
  const Operand oa = matrix(a, opt.trans_a), oc = matrix(c, false);
  const Operand plain_b = plain_b_operand(plain, trans_b);
  const int64_t m = oa.dims[0], k = oa.dims[1], n = plain_b.dims[1];
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!opt.accumulate) c.zero();
    return;
  }
  Operand ob = plain_b;
  ob.layout = &packed_layout(k, n);
  ob.ptr = packed.raw();
  profile::Scope timed(profile::Category::gemm);
  execute_matmul(ec, oa, ob, oc, nullptr, opt.alpha, opt.accumulate, &plain_b);
}

template <>
int64_t plans_created<Backend::cpu>() {
  return cache().created;
}

}  // namespace weft::kernels::impl
