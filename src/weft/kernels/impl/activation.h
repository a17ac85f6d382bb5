// The implementations of kernels/activation.h, one template per kernel:
// kernels/cpu/activation.cpp and kernels/cuda/ define the Backend::cpu and
// Backend::cuda specializations. Only kernels/activation.cpp calls them, after
// checking the arguments.
//
// GELU, SwiGLU, bias and element-wise sums (kernels/activation.h): oneDNN
// eltwise and OpenMP loops on the CPU, grid-stride kernels on CUDA.
#pragma once

#include "weft/core/exec_context.h"
#include "weft/kernels/activation.h"
#include "weft/kernels/dispatch.h"

namespace weft::kernels::impl {

template <Backend B>
void gelu_forward(const ExecContext& ec, const Tensor& x, Tensor& y);
template <Backend B>
void gelu_backward(const ExecContext& ec, const Tensor& dy, const Tensor& x, Tensor& dx);
template <Backend B>
void swiglu_forward(const ExecContext& ec, const Tensor& gu, Tensor& out);
template <Backend B>
void swiglu_backward(const ExecContext& ec, const Tensor& dy, const Tensor& gu, Tensor& dgu);
template <Backend B>
void bias_add(const ExecContext& ec, Tensor& y, const Tensor& bias);
template <Backend B>
void bias_backward(const ExecContext& ec, const Tensor& dy, Tensor& dbias);
template <Backend B>
void add(const ExecContext& ec, const Tensor& a, const Tensor& b, Tensor& out);
template <Backend B>
void axpy(const ExecContext& ec, float alpha, const Tensor& x, Tensor& y);
template <Backend B>
void scale(const ExecContext& ec, Tensor& y, float alpha);

}  // namespace weft::kernels::impl
