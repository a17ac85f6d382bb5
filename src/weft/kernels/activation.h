// GELU (tanh approximation, as GPT-2), bias add and its gradient, residual add.
// f32 or bf16 tensors; arithmetic in f32.
#pragma once

#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"

namespace weft::kernels {

// x (N) -> y (N) = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))   (oneDNN eltwise gelu_tanh)
void gelu_forward(const ExecContext& ec, const Tensor& x, Tensor& y);
// dy (N), x (N) -> dx (N)
void gelu_backward(const ExecContext& ec, const Tensor& dy, const Tensor& x, Tensor& dx);

// y (N,C) += bias (C)   (bias f32)
void bias_add(const ExecContext& ec, Tensor& y, const Tensor& bias);
// dy (N,C) -> dbias (C) += Σ_rows dy   (f32; fixed blocking, bitwise the same for any thread count)
void bias_backward(const ExecContext& ec, const Tensor& dy, Tensor& dbias);

// a (N), b (N) -> out (N) = a + b   (out may alias a or b)
void add(const ExecContext& ec, const Tensor& a, const Tensor& b, Tensor& out);
// y (N) += alpha · x (N)
void axpy(const ExecContext& ec, float alpha, const Tensor& x, Tensor& y);
// y (N) *= alpha
void scale(const ExecContext& ec, Tensor& y, float alpha);

// Transition: the forms without a context, until nn/ and parallel/ are migrated (issue 11).
inline void gelu_forward(const Tensor& x, Tensor& y) { gelu_forward(ExecContext::host(), x, y); }
inline void gelu_backward(const Tensor& dy, const Tensor& x, Tensor& dx) {
  gelu_backward(ExecContext::host(), dy, x, dx);
}
inline void bias_add(Tensor& y, const Tensor& bias) { bias_add(ExecContext::host(), y, bias); }
inline void bias_backward(const Tensor& dy, Tensor& dbias) {
  bias_backward(ExecContext::host(), dy, dbias);
}
inline void add(const Tensor& a, const Tensor& b, Tensor& out) {
  add(ExecContext::host(), a, b, out);
}
inline void axpy(float alpha, const Tensor& x, Tensor& y) {
  axpy(ExecContext::host(), alpha, x, y);
}
inline void scale(Tensor& y, float alpha) { scale(ExecContext::host(), y, alpha); }

}  // namespace weft::kernels
