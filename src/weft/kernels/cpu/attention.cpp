#include "weft/kernels/cpu/attention.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>

#include "weft/core/exec_context.h"
#include "weft/kernels/cpu/gemm.h"
#include "weft/kernels/elementwise.h"
#include "weft/kernels/random.h"

namespace weft::kernels::cpu {

namespace {

using detail::exp_in_range;
using detail::from_f32;
using detail::to_f32;

struct Dims {
  int64_t B, T, C, H, D;
  // Token (b, t) is row t·B + b of the activations instead of b·T + t.
  bool sequence_major;

  // Rows between consecutive batch entries and between consecutive positions.
  int64_t batch_rows() const { return sequence_major ? 1 : T; }
  int64_t position_rows() const { return sequence_major ? B : 1; }
  // The shape of an activation of `width` columns.
  Shape tokens(int64_t width) const {
    return sequence_major ? Shape{T, B, width} : Shape{B, T, width};
  }
};

Dims check_qkv(const Tensor& qkv, const AttentionConfig& cfg) {
  detail::check_float(qkv, "attention qkv");
  WEFT_CHECK(qkv.dim() == 3, "attention qkv must be {}, got shape {}",
             cfg.sequence_major ? "(T, B, 3C)" : "(B, T, 3C)", qkv.shape());
  WEFT_CHECK(cfg.heads >= 1, "attention needs at least one head, got {}", cfg.heads);
  const int64_t width = qkv.size(2);
  WEFT_CHECK(width > 0 && width % (3 * cfg.heads) == 0,
             "attention qkv {} must have a last dimension 3·C with C divisible by the {} heads",
             qkv.shape(), cfg.heads);
  WEFT_CHECK(cfg.dropout >= 0.0f && cfg.dropout < 1.0f,
             "attention dropout must lie in [0, 1), got {}", cfg.dropout);
  const int64_t C = width / 3;
  const int64_t B = cfg.sequence_major ? qkv.size(1) : qkv.size(0);
  const int64_t T = cfg.sequence_major ? qkv.size(0) : qkv.size(1);
  return {B, T, C, cfg.heads, C / cfg.heads, cfg.sequence_major};
}

Shape square_shape(const Dims& d) { return {d.B, d.H, d.T, d.T}; }

// Keeps t when it already has the shape and dtype, so steady-state calls reuse it.
void ensure(const ExecContext& ec, Tensor& t, const Shape& shape, DType dtype) {
  if (!t.defined() || !(t.shape() == shape) || t.dtype() != dtype) t = ec.empty(shape, dtype);
}

// The first `bytes` bytes of the workspace, grown if it is smaller.
char* scratch(const ExecContext& ec, AttentionWorkspace& ws, int64_t bytes) {
  if (!ws.buffer.defined() || ws.buffer.nbytes() < bytes) {
    ws.buffer = ec.empty({bytes}, DType::u8);
  }
  return reinterpret_cast<char*>(ws.buffer.data<uint8_t>());
}

int64_t element_bytes(DType dt) { return dt == DType::f32 ? 4 : 2; }

// Workspace regions start on cache lines.
int64_t aligned(int64_t bytes) { return (bytes + 63) / 64 * 64; }

// The (T x D) matrix of every (b, h) inside a (B, T, width) or (T, B, width)
// activation, its head columns starting at `col`; read transposed (D x T)
// when asked.
StridedMatrices head_matrices(const Tensor& t, const Dims& d, int64_t col, bool transposed) {
  const int64_t width = t.size(2);
  StridedMatrices m;
  m.data = static_cast<char*>(t.raw()) + col * element_bytes(t.dtype());
  m.dtype = t.dtype();
  m.batch[0] = d.B;
  m.batch[1] = d.H;
  const int64_t position_stride = d.position_rows() * width;
  m.batch_stride[0] = d.batch_rows() * width;
  m.batch_stride[1] = d.D;
  m.rows = transposed ? d.D : d.T;
  m.cols = transposed ? d.T : d.D;
  m.row_stride = transposed ? 1 : position_stride;
  m.col_stride = transposed ? position_stride : 1;
  return m;
}

// Whether q, k and v are multiplied from dense (B, H, T, D) copies rather
// than in place inside qkv. oneDNN 2.6 runs its brgemm kernels (AMX for
// bf16) only on operands that are a permutation of a dense tensor, and the
// heads inside qkv (rows of stride 3C) get its gemm:jit fallback instead: for
// bf16 that is several times slower than copying the heads out and multiplying
// the copies (QKᵀ at B=4, T=256, H=12, D=64 on one core: 17 ms in place,
// 1.7 ms dense). For f32 the gain in the products only pays for the copies,
// so f32 stays in place and needs no extra scratch. out and dout, (B, T, C)
// or (T, B, C) with heads at stride C, are a permutation of a dense tensor
// and are always used in place.
bool copies_heads(DType dt) { return dt == DType::bf16; }

// Bytes of one dense (B, H, T, D) copy.
int64_t heads_bytes(const Dims& d, DType dt) {
  return aligned(d.B * d.T * d.C * element_bytes(dt));
}

// The (rows x cols) matrix of every (b, h) in a dense (B, H, rows, cols)
// buffer; read transposed (cols x rows) when asked.
StridedMatrices dense_matrices(void* data, DType dtype, const Dims& d, int64_t rows, int64_t cols,
                               bool transposed) {
  StridedMatrices m;
  m.data = data;
  m.dtype = dtype;
  m.batch[0] = d.B;
  m.batch[1] = d.H;
  m.batch_stride[0] = d.H * rows * cols;
  m.batch_stride[1] = rows * cols;
  m.rows = transposed ? cols : rows;
  m.cols = transposed ? rows : cols;
  m.row_stride = transposed ? 1 : cols;
  m.col_stride = transposed ? cols : 1;
  return m;
}

// The (T x D) head matrices of a dense (B, H, T, D) copy.
StridedMatrices dense_heads(void* data, DType dtype, const Dims& d, bool transposed) {
  return dense_matrices(data, dtype, d, d.T, d.D, transposed);
}

// The (T x T) matrices of a dense (B, H, T, T) buffer.
StridedMatrices square_matrices(void* data, DType dtype, const Dims& d, bool transposed) {
  return dense_matrices(data, dtype, d, d.T, d.T, transposed);
}

// Part `part` (0 q, 1 k, 2 v) of a (B, T, 3C) tensor: its dense copy when
// there is one, else in place.
StridedMatrices part_heads(const Tensor& t, const Dims& d, int64_t part, char* dense,
                           bool transposed) {
  return dense ? dense_heads(dense, t.dtype(), d, transposed)
               : head_matrices(t, d, part * d.C, transposed);
}

// A part (0 q, 1 k, 2 v) of a (B, T, 3C) tensor and its dense copy.
struct HeadCopy {
  int64_t part;
  char* dense;
};

// Copies parts of the (B, T, 3C) tensor t into their dense copies (pack) or
// back (unpack), in one pass over the rows of t.
template <bool kPack>
void copy_heads(const ExecContext& ec, const Tensor& t, const Dims& d,
                std::initializer_list<HeadCopy> copies) {
  const int64_t es = element_bytes(t.dtype());
  const int64_t width = t.size(2) * es, head = d.D * es;
  char* base = static_cast<char*>(t.raw());
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
  for (int64_t row = 0; row < d.B * d.T; ++row) {
    const int64_t b = d.sequence_major ? row % d.B : row / d.T;
    const int64_t tt = d.sequence_major ? row / d.B : row % d.T;
    for (const HeadCopy& c : copies) {
      char* strided = base + row * width + c.part * d.C * es;
      char* dense = c.dense + (b * d.H * d.T + tt) * head;
      for (int64_t h = 0; h < d.H; ++h) {
        char* s = strided + h * head;
        char* x = dense + h * d.T * head;
        if constexpr (kPack) {
          std::memcpy(x, s, static_cast<size_t>(head));
        } else {
          std::memcpy(s, x, static_cast<size_t>(head));
        }
      }
    }
  }
}

// e^x for x <= 0 (exp_in_range after a clamp). std::exp does not vectorize
// without -ffast-math, and the softmax spends most of its time here.
inline float exp_nonpositive(float x) {
  // max(x, -87): below -87 e^x is no longer a normal float, and the softmax
  // divides by a sum >= 1, so e^-87 instead of 0 changes nothing visible. It is
  // an unsigned min of the bit patterns (a negative float's pattern grows with
  // its magnitude) because GCC does not vectorize a float compare under the
  // default -ftrapping-math.
  return exp_in_range(
      std::bit_cast<float>(std::min(std::bit_cast<uint32_t>(x), std::bit_cast<uint32_t>(-87.0f))));
}

// Row t of (b, h) attends to positions 0 .. visible-1.
inline int64_t visible(const AttentionConfig& cfg, const Dims& d, int64_t t) {
  return cfg.causal ? t + 1 : d.T;
}

// scores (B,H,T,T) f32, scaled, unmasked -> probs (B,H,T,T) [, mask, weights]
// probs may be the scores buffer itself (f32). Visible entries only: the
// others are written as zeros without being looked at.
template <typename T>
void softmax_forward(const ExecContext& ec, const Dims& d, const AttentionConfig& cfg,
                     float* scores, T* probs, uint8_t* mask, T* weights) {
  const float keep_scale = 1.0f / (1.0f - cfg.dropout);
  const T zero = from_f32<T>(0.0f);
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
  for (int64_t bh = 0; bh < d.B * d.H; ++bh) {
    for (int64_t t = 0; t < d.T; ++t) {
      const int64_t row = (bh * d.T + t) * d.T;
      const int64_t n = visible(cfg, d, t);
      float* s = scores + row;
      T* p = probs + row;
      // A select, not std::max, so that GCC vectorizes the reduction.
      float max = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : max)
      for (int64_t j = 0; j < n; ++j) max = s[j] > max ? s[j] : max;
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < n; ++j) {
        s[j] = exp_nonpositive(s[j] - max);
        sum += s[j];
      }
      const float inv = 1.0f / sum;
      if (!mask) {
        for (int64_t j = 0; j < n; ++j) p[j] = from_f32<T>(s[j] * inv);
      } else {
        uint8_t* m = mask + row;
        T* w = weights + row;
        for_each_uniform(cfg.seed, cfg.offset + static_cast<uint64_t>(row), n,
                         [&](int64_t j, float u) {
                           const float prob = s[j] * inv;  // read before p (maybe s) is written
                           const bool keep = u >= cfg.dropout;
                           p[j] = from_f32<T>(prob);
                           m[j] = keep;
                           w[j] = from_f32<T>(keep ? prob * keep_scale : 0.0f);
                         });
        std::fill(m + n, m + d.T, uint8_t{0});
        std::fill(w + n, w + d.T, zero);
      }
      std::fill(p + n, p + d.T, zero);
    }
  }
}

// dweights (B,H,T,T) f32 (= dO·Vᵀ), probs, mask -> dscores (B,H,T,T), unscaled
// by 1/√D (the next products apply it). dscores may be the dweights buffer
// itself (f32).
template <typename T>
void softmax_backward(const ExecContext& ec, const Dims& d, const AttentionConfig& cfg,
                      float* dweights, const T* probs, const uint8_t* mask, T* dscores) {
  const float keep_scale = 1.0f / (1.0f - cfg.dropout);
  const T zero = from_f32<T>(0.0f);
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
  for (int64_t bh = 0; bh < d.B * d.H; ++bh) {
    for (int64_t t = 0; t < d.T; ++t) {
      const int64_t row = (bh * d.T + t) * d.T;
      const int64_t n = visible(cfg, d, t);
      float* g = dweights + row;  // becomes dL/dprobs
      const T* p = probs + row;
      T* ds = dscores + row;
      if (mask) {
        const uint8_t* m = mask + row;
        for (int64_t j = 0; j < n; ++j) g[j] *= m[j] ? keep_scale : 0.0f;
      }
      float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
      for (int64_t j = 0; j < n; ++j) dot += g[j] * to_f32(p[j]);
      for (int64_t j = 0; j < n; ++j) ds[j] = from_f32<T>(to_f32(p[j]) * (g[j] - dot));
      std::fill(ds + n, ds + d.T, zero);
    }
  }
}

}  // namespace

void attention_forward(const ExecContext& ec, const Tensor& qkv, const AttentionConfig& cfg,
                       Tensor& out, AttentionSaved& saved, AttentionWorkspace& workspace) {
  const Dims d = check_qkv(qkv, cfg);
  const DType dt = qkv.dtype();
  WEFT_CHECK(out.shape() == d.tokens(d.C) && out.dtype() == dt,
             "attention output must be {} {} for qkv {}, got {} {}", dtype_name(dt), d.tokens(d.C),
             qkv.shape(), dtype_name(out.dtype()), out.shape());
  const bool dropout = cfg.dropout > 0.0f;
  ensure(ec, saved.probs, square_shape(d), dt);
  if (dropout) {
    ensure(ec, saved.mask, square_shape(d), DType::u8);
    ensure(ec, saved.weights, square_shape(d), dt);
  } else {
    saved.mask = Tensor();
    saved.weights = Tensor();
  }
  if (d.B * d.T == 0) return;

  // Scores go straight into probs for f32; bf16 keeps f32 scores in scratch,
  // followed by the copies of q, k and v.
  const int64_t n = saved.probs.numel();
  void* scores = saved.probs.raw();
  char* copy[3] = {};
  if (copies_heads(dt)) {
    const int64_t scores_bytes = aligned(n * 4), hb = heads_bytes(d, dt);
    char* base = scratch(ec, workspace, scores_bytes + 3 * hb);
    scores = base;
    for (int64_t p = 0; p < 3; ++p) copy[p] = base + scores_bytes + p * hb;
    copy_heads<true>(ec, qkv, d, {{0, copy[0]}, {1, copy[1]}, {2, copy[2]}});
  }
  const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(d.D));
  // scores = Q·Kᵀ/√D
  cpu::batched_gemm(ec, part_heads(qkv, d, 0, copy[0], false), part_heads(qkv, d, 1, copy[1], true),
                    square_matrices(scores, DType::f32, d, false), inv_sqrt_d);
  detail::dispatch_float(dt, [&]<typename T>() {
    softmax_forward<T>(ec, d, cfg, static_cast<float*>(scores), static_cast<T*>(saved.probs.raw()),
                       dropout ? saved.mask.data<uint8_t>() : nullptr,
                       dropout ? static_cast<T*>(saved.weights.raw()) : nullptr);
  });
  // out = weights·V
  const Tensor& weights = dropout ? saved.weights : saved.probs;
  cpu::batched_gemm(ec, square_matrices(weights.raw(), dt, d, false),
                    part_heads(qkv, d, 2, copy[2], false), head_matrices(out, d, 0, false));
}

void attention_backward(const ExecContext& ec, const Tensor& dout, const Tensor& qkv,
                        const AttentionSaved& saved, const AttentionConfig& cfg, Tensor& dqkv,
                        AttentionWorkspace& workspace) {
  const Dims d = check_qkv(qkv, cfg);
  const DType dt = qkv.dtype();
  WEFT_CHECK(dout.shape() == d.tokens(d.C) && dout.dtype() == dt,
             "attention output gradient must be {} {} for qkv {}, got {} {}", dtype_name(dt),
             d.tokens(d.C), qkv.shape(), dtype_name(dout.dtype()), dout.shape());
  WEFT_CHECK(dqkv.shape() == qkv.shape() && dqkv.dtype() == dt,
             "attention qkv gradient must be {} {} like qkv, got {} {}", dtype_name(dt),
             qkv.shape(), dtype_name(dqkv.dtype()), dqkv.shape());
  WEFT_CHECK(dqkv.raw() != qkv.raw() && dqkv.raw() != dout.raw(),
             "attention backward cannot write dqkv over qkv or dout");
  const Shape square = square_shape(d);
  WEFT_CHECK(saved.probs.defined() && saved.probs.shape() == square && saved.probs.dtype() == dt,
             "attention saved probabilities must be {} {} (from the forward of qkv {})",
             dtype_name(dt), square, qkv.shape());
  const bool dropout = cfg.dropout > 0.0f;
  if (dropout) {
    WEFT_CHECK(saved.mask.defined() && saved.mask.shape() == square &&
                   saved.mask.dtype() == DType::u8 && saved.weights.defined() &&
                   saved.weights.shape() == square && saved.weights.dtype() == dt,
               "attention backward with dropout {} needs the mask and weights of a forward with "
               "dropout, shape {}",
               cfg.dropout, square);
  }
  if (d.B * d.T == 0) return;

  // Scratch: dweights (f32); for bf16 then the softmax gradient and three
  // dense head buffers: V, later Q and K, and the gradient of one part at a
  // time on its way into dqkv.
  const int64_t n = saved.probs.numel();
  const bool dense = copies_heads(dt);
  const int64_t f32_bytes = aligned(n * 4);
  const int64_t dscores_bytes = dense ? aligned(n * 2) : 0;
  const int64_t hb = dense ? heads_bytes(d, dt) : 0;
  char* base = scratch(ec, workspace, f32_bytes + dscores_bytes + 3 * hb);
  float* dweights = reinterpret_cast<float*>(base);
  void* dscores = dense ? base + f32_bytes : base;
  char* slot[3] = {};
  if (dense) {
    for (int64_t p = 0; p < 3; ++p) slot[p] = base + f32_bytes + dscores_bytes + p * hb;
  }
  char* v = slot[0];
  char* grad = slot[2];

  const Tensor& weights = dropout ? saved.weights : saved.probs;
  if (dense) copy_heads<true>(ec, qkv, d, {{2, v}});
  // dV = weightsᵀ·dO
  cpu::batched_gemm(ec, square_matrices(weights.raw(), dt, d, true),
                    head_matrices(dout, d, 0, false), part_heads(dqkv, d, 2, grad, false));
  if (dense) copy_heads<false>(ec, dqkv, d, {{2, grad}});

  // dweights = dO·Vᵀ in f32; for bf16 the softmax gradient then goes to a
  // second, bf16 region because the next products read bf16 operands.
  cpu::batched_gemm(ec, head_matrices(dout, d, 0, false), part_heads(qkv, d, 2, v, true),
                    square_matrices(dweights, DType::f32, d, false));
  detail::dispatch_float(dt, [&]<typename T>() {
    softmax_backward<T>(ec, d, cfg, dweights, static_cast<const T*>(saved.probs.raw()),
                        dropout ? saved.mask.data<uint8_t>() : nullptr, static_cast<T*>(dscores));
  });

  // dQ = dS·K/√D, dK = dSᵀ·Q/√D
  char* q = slot[0];
  char* k = slot[1];
  if (dense) copy_heads<true>(ec, qkv, d, {{0, q}, {1, k}});
  const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(d.D));
  cpu::batched_gemm(ec, square_matrices(dscores, dt, d, false), part_heads(qkv, d, 1, k, false),
                    part_heads(dqkv, d, 0, grad, false), inv_sqrt_d);
  if (dense) copy_heads<false>(ec, dqkv, d, {{0, grad}});
  cpu::batched_gemm(ec, square_matrices(dscores, dt, d, true), part_heads(qkv, d, 0, q, false),
                    part_heads(dqkv, d, 1, grad, false), inv_sqrt_d);
  if (dense) copy_heads<false>(ec, dqkv, d, {{1, grad}});
}

}  // namespace weft::kernels::cpu
