// GELU (tanh approximation, as GPT-2), SwiGLU (as Llama's MLP), bias add and
// its gradient, residual add. f32 or bf16 tensors; arithmetic in f32.
#pragma once

#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"

namespace weft::kernels {

// x (N) -> y (N) = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))   (oneDNN eltwise gelu_tanh)
void gelu_forward(const ExecContext& ec, const Tensor& x, Tensor& y);
// dy (N), x (N) -> dx (N)
void gelu_backward(const ExecContext& ec, const Tensor& dy, const Tensor& x, Tensor& dx);

// gu (..., 2N) = [gate | up] per row -> out (..., N) = silu(gate) · up,
// silu(g) = g / (1 + e^−g)
void swiglu_forward(const ExecContext& ec, const Tensor& gu, Tensor& out);
// dy (..., N), gu (..., 2N) -> dgu (..., 2N) (overwritten):
// dgate = dy · up · silu'(gate), dup = dy · silu(gate)
void swiglu_backward(const ExecContext& ec, const Tensor& dy, const Tensor& gu, Tensor& dgu);

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

// dst (N) = src (N) in dst's dtype, as Tensor::copy_from converts (f32 to
// bf16 rounds to nearest even), bit for bit; on the CPU f32 <-> bf16 runs on
// the context's threads (a weight cast before a bf16 GEMM), any other pair,
// and a GPU, as copy_from.
void convert(const ExecContext& ec, const Tensor& src, Tensor& dst);

}  // namespace weft::kernels
