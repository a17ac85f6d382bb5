// Attention through cuDNN's fused scaled-dot-product attention (flash
// attention on Hopper's tensor cores), built with NVIDIA's header-only cuDNN
// frontend and loaded at run time: libcudnn.so.9 is opened on first use, so a
// weft binary runs where cuDNN is missing and says why the path is off.
//
// cuDNN reads Q, K and V with strides straight from the packed qkv
// activation and writes dQ, dK and dV into the packed gradient, in either
// row layout (batch- or sequence-major); its softmax statistics are the
// logsumexp kernels/attention.h saves, so forward and backward of either path
// read each other's. One built graph per shape and direction, cached for the
// process (per device); execution is serialized per device handle.
//
// It takes bf16 calls without dropout (cuDNN's masks are not the CPU's), with
// head widths that are multiples of 8 up to 128, multi-head or multi-query
// attention (cuDNN groups query heads with key/value heads contiguously,
// weft's grouped-query layout interleaves them: h mod Hkv), 16-byte aligned
// tensors. Everything else, and every shape cuDNN refuses, runs weft's own
// kernels. Internal to kernels/cuda/ (attention_forward.cu, _backward.cu).
#pragma once

#include <initializer_list>
#include <string>

#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"
#include "weft/kernels/attention.h"
#include "weft/kernels/attention_dims.h"

namespace weft::kernels::cuda {

// Whether cuDNN may take a call of these dimensions (the shape rules above,
// cfg.cudnn, WEFT_CUDNN not "off", the library loadable); the tensors'
// alignment is checked too. A true answer can still end in a refusal by
// cuDNN itself, which the calls below report.
bool cudnn_attention_takes(const detail::AttentionDims& d, DType dt, const AttentionConfig& cfg,
                           std::initializer_list<const Tensor*> tensors);

// Run the forward (out, lse) or backward (dqkv) through cuDNN. Return false,
// having done nothing, where cuDNN refuses the shape (remembered: later calls
// of that shape refuse at once); the caller then runs weft's kernels.
bool cudnn_attention_forward(const ExecContext& ec, const Tensor& qkv,
                             const detail::AttentionDims& d, const AttentionConfig& cfg,
                             Tensor& out, Tensor& lse, AttentionWorkspace& workspace);
bool cudnn_attention_backward(const ExecContext& ec, const Tensor& dout, const Tensor& qkv,
                              const AttentionSaved& saved, const detail::AttentionDims& d,
                              const AttentionConfig& cfg, Tensor& dqkv,
                              AttentionWorkspace& workspace);

// "cuDNN 9.x.y (frontend 1.32.0)" when the library loads, else "off: why".
std::string cudnn_attention_status();

}  // namespace weft::kernels::cuda
