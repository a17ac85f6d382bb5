// Matrix multiplication, and the FP8 product of two quantized tensors
// (quantized_gemm, below).
//
//   c (m,n) = alpha * op(a) (m,k) · op(b) (k,n)  [+ bias (n)]  [+ c if accumulate]
//
// op(x) is x or xᵀ. Inputs are f32 or bf16 (both the same); the product
// accumulates in f32; c is f32 or bf16 (f32 inputs into a bf16 c: the f32
// result rounded once, through an f32 buffer). Tensors of rank > 2 are viewed as
// (rows, last dim). On the CPU this is a oneDNN matmul whose primitive is
// created once per shape and cached per thread, so a steady-state call creates
// and allocates nothing.
#pragma once

#include <cstdint>

#include "weft/core/exec_context.h"
#include "weft/core/quantized.h"
#include "weft/core/tensor.h"

namespace weft::kernels {

// What a GEMM does with its product p = op(a)·op(b) besides writing it
// (GemmOptions::epilogue): the MLP's activation and the bias gradients that
// cuBLASLt's epilogues compute inside the GEMM (CUBLASLT_EPILOGUE_GELU_AUX_BIAS,
// DGELU_BGRAD, BGRADB). Every epilogue has exactly the result of the unfused
// sequence written next to it, which is what the CPU (and a GPU where
// gemm_epilogue_fused is false) runs, bit for bit; a fused GPU GEMM rounds
// once where the sequence rounds twice (and a bias gradient of a bf16 output
// is rounded to bf16 by cuBLASLt before it is added to the f32 gradient).
// Epilogues take alpha = 1; only bgrad_a accumulates.
enum class GemmEpilogue {
  none,
  // aux = p + bias (the pre-activation: c's shape and dtype; bias optional),
  // c = gelu(aux) (tanh approximation):
  //   gemm(a, b, aux, {bias}); gelu_forward(aux, c)
  gelu_aux,
  // c = p ⊙ gelu'(aux) (aux: the forward's pre-activation, c's shape and
  // dtype), and when bias_grad is given, bias_grad (n) += column sums of c:
  //   gemm(a, b, c); gelu_backward(c, aux, c); bias_backward(c, bias_grad)
  dgelu_bgrad,
  // c = p (+ c if accumulate) and bias_grad (m) += the sums of op(a)'s rows
  // over k; needs trans_a (a is (k, m): a's column sums), as in the wgrad GEMM
  // dW = dyᵀ·x whose bias gradient is db = Σ_rows dy:
  //   gemm(a, b, c); bias_backward(a, bias_grad)
  bgrad_a,
};
const char* gemm_epilogue_name(GemmEpilogue e);  // "none", "gelu_aux", ...

struct GemmOptions {
  bool trans_a = false;
  bool trans_b = false;
  // c += product (gradient accumulation) instead of c = product.
  bool accumulate = false;
  float alpha = 1.0f;
  // Optional bias of n elements (f32 or bf16), added to every row of the product.
  const Tensor* bias = nullptr;
  GemmEpilogue epilogue = GemmEpilogue::none;
  // gelu_aux: written; dgelu_bgrad: read. Shaped as c, c's dtype.
  Tensor* aux = nullptr;
  // dgelu_bgrad (optional): n elements; bgrad_a: m elements. f32, added to.
  Tensor* bias_grad = nullptr;
};

void gemm(const ExecContext& ec, const Tensor& a, const Tensor& b, Tensor& c,
          const GemmOptions& opt = {});

// Whether gemm(ec, a, b, c, opt) computes opt.epilogue inside the GEMM
// (cuBLASLt's epilogue) rather than as the unfused sequence: false on the
// CPU and for GemmEpilogue::none; on a GPU, true when the tensors fit the
// epilogue's layout rules (aux rows a multiple of 8 elements, 16-byte aligned
// buffers; not f32 inputs for a bf16 output) and cuBLASLt's heuristic has an
// algorithm for the epilogue on this shape. The answer (a refusal too) is
// cached with the shape's plan, so asking costs a lookup after the first time.
bool gemm_epilogue_fused(const ExecContext& ec, const Tensor& a, const Tensor& b, const Tensor& c,
                         const GemmOptions& opt);

// A weight laid out once for many products as GEMM operand b (pack_b). On a
// CPU with native bf16 kernels, oneDNN's bf16 matmul reads b in a blocked
// layout, into which a plain b is copied inside every product: a grouped
// layer whose experts' weights each multiply a few hundred rows pays that
// copy in every GEMM, where a packed weight pays it once per weight change.
// Elsewhere (f32, emulated bf16, a GPU) nothing is packed and products read
// the plain operand. Packed or not, a product's result is bit for bit the
// plain operand's: products whose shape would make oneDNN pick another layout
// or kernel read the plain operand (it must stay alive and unchanged while
// the packed copy is used).
class PackedWeight {
 public:
  bool defined() const { return plain_.defined(); }
  // Whether a packed copy exists (else products read plain()).
  bool packed() const { return packed_.defined(); }
  const Tensor& plain() const { return plain_; }
  // Whether the products read plainᵀ (the forward's x·Wᵀ).
  bool trans_b() const { return trans_b_; }
  // op(plain) is (k, n).
  int64_t k() const;
  int64_t n() const;
  // The packed copy's bytes (0 when nothing is packed).
  int64_t packed_bytes() const { return packed_.defined() ? packed_.nbytes() : 0; }

 private:
  friend void pack_b(const ExecContext& ec, const Tensor& b, bool trans_b, PackedWeight& out);
  friend void gemm(const ExecContext& ec, const Tensor& a, const PackedWeight& b, Tensor& c,
                   const GemmOptions& opt);
  Tensor plain_;
  bool trans_b_ = false;
  Tensor packed_;  // u8, oneDNN's blocked layout of op(plain)
};

// Packs `b` (op(b) = bᵀ when trans_b) into `out`, reusing its buffer when
// the size fits; `out` refers to `b` for the products that read it plain.
// Memory: tagged weight_cache.
void pack_b(const ExecContext& ec, const Tensor& b, bool trans_b, PackedWeight& out);
// gemm() with a packed b: opt.trans_b must be b.trans_b() (and no bias).
void gemm(const ExecContext& ec, const Tensor& a, const PackedWeight& b, Tensor& c,
          const GemmOptions& opt = {});

// A batch of matrices inside a buffer, described by strides (in elements), so
// that e.g. attention heads can be multiplied in place inside a (B, T, 3C)
// activation without copies. The last dimension must be dense (col stride 1)
// or, for a transposed operand, the row dimension (row stride 1).
struct StridedMatrices {
  void* data = nullptr;
  DType dtype = DType::f32;
  int64_t batch[2] = {1, 1};         // up to two batch dimensions
  int64_t batch_stride[2] = {0, 0};  // elements between consecutive batch entries
  int64_t rows = 0, cols = 0;
  int64_t row_stride = 0, col_stride = 1;
};

// c[i] = alpha * a[i] · b[i] (+ c[i] if accumulate) for every batch entry; the
// shapes (rows, cols) must agree as for a plain product; a transposed operand
// is expressed with strides (row_stride 1, col_stride = leading dimension).
void batched_gemm(const ExecContext& ec, const StridedMatrices& a, const StridedMatrices& b,
                  const StridedMatrices& c, float alpha = 1.0f, bool accumulate = false);

// One operand of a quantized GEMM: a per-tensor FP8 QuantizedTensor (e4m3 or
// e5m2) and which of its copies to multiply, the row-wise data (x) or the
// column-wise copy (xᵀ).
struct QuantizedOperand {
  const QuantizedTensor* q = nullptr;
  bool columnwise = false;
  // The matrix this operand multiplies: (rows, cols) of the chosen copy.
  int64_t rows() const { return columnwise ? q->cols : q->rows; }
  int64_t cols() const { return columnwise ? q->rows : q->cols; }
};

struct QuantizedGemmOptions {
  // c += product instead of c = product (f32 c: gradient accumulation).
  bool accumulate = false;
  float alpha = 1.0f;
  // Hopper's fast FP8 accumulation (fewer promotions to f32 inside the MMA):
  // faster, less exact; Transformer Engine takes it for forward GEMMs only.
  // The CPU's emulation ignores it.
  bool fast_accumulation = false;
};

// c (m, n) = alpha · A · Bᵀ (+ c if accumulate), A (m, k) and B (n, k) the
// chosen copies of a and b with their decode scales applied: the "TN" product
// Hopper's FP8 tensor cores compute, so a caller passes the copy whose rows
// run along k (the weight's column-wise copy for dgrad, both column-wise
// copies for wgrad), as Transformer Engine does. Not both e5m2. c is bf16 or
// f32. On a GPU: cuBLASLt FP8 on sm_89 or newer, the scale-inverses read from
// device memory, nothing dequantized; on the CPU: the exact emulation (both
// copies dequantized to f32, an f32 GEMM), which a GPU matches up to the
// order of its f32 sums. Where cuBLASLt's FP8 kernels cannot take the call
// (quantized_gemm_is_native), a GPU runs that same emulation on its own
// kernels.
void quantized_gemm(const ExecContext& ec, const QuantizedOperand& a, const QuantizedOperand& b,
                    Tensor& c, const QuantizedGemmOptions& opt = {});

// Whether quantized_gemm multiplies FP8 on the device's tensor cores: a GPU
// of compute capability 8.9 or newer, per-tensor scaling, and the layout
// cuBLASLt's FP8 kernels need — k a multiple of 16 (the operands' rows are
// k bytes), rows of c a multiple of 16 bytes, every buffer 16-byte aligned.
// False on the CPU (the emulation).
bool quantized_gemm_is_native(const ExecContext& ec, const QuantizedOperand& a,
                              const QuantizedOperand& b, const Tensor& c);
// The layout rule alone (device aside), for tests.
bool fp8_gemm_layout_fits(const QuantizedOperand& a, const QuantizedOperand& b, const Tensor& c);

// Number of primitives created so far by the calling thread (tests check that
// repeated calls of one shape create nothing new).
int64_t gemm_primitives_created();

}  // namespace weft::kernels
