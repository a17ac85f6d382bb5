// The CUDA implementations of kernels/activation.h; callers go through
// kernels/activation.h, which checks the devices and dispatches here.
#pragma once

#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"

namespace weft::kernels::cuda {

void gelu_forward(const ExecContext& ec, const Tensor& x, Tensor& y);
void gelu_backward(const ExecContext& ec, const Tensor& dy, const Tensor& x, Tensor& dx);
void bias_add(const ExecContext& ec, Tensor& y, const Tensor& bias);
void bias_backward(const ExecContext& ec, const Tensor& dy, Tensor& dbias);
void add(const ExecContext& ec, const Tensor& a, const Tensor& b, Tensor& out);
void axpy(const ExecContext& ec, float alpha, const Tensor& x, Tensor& y);
void scale(const ExecContext& ec, Tensor& y, float alpha);

}  // namespace weft::kernels::cuda
