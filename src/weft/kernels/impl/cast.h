// The implementations of kernels/cast.h, one template per kernel:
// kernels/cpu/cast.cpp and cast_dequant.cpp, and kernels/cuda/, define the
// Backend::cpu and Backend::cuda specializations. Only kernels/cast.cpp calls
// them, after checking the arguments.
//
// Quantization (kernels/cast.h). CUDA has per-tensor FP8 scaling
// (ScalingMode::tensor), fp8-block's 1x128 / 128x128 blocks and MXFP8's 1x32
// blocks (kernels/cuda/block_casts.h), e4m3 / e5m2, codes bit for bit the
// CPU's: NVFP4's modes throw weft::Error there. On CUDA quantize and amax return
// an amax to the host, so they synchronize with the stream.
#pragma once

#include "weft/core/exec_context.h"
#include "weft/kernels/cast.h"
#include "weft/kernels/dispatch.h"

namespace weft::kernels::impl {

template <Backend B>
float amax(const ExecContext& ec, const Tensor& x);
template <Backend B>
void quantize(const ExecContext& ec, const Tensor& x, const QuantizeConfig& cfg,
              QuantizedTensor& q);
template <Backend B>
void dequantize(const ExecContext& ec, const QuantizedTensor& q, bool columnwise, Tensor& out);
// CPU only (kernels/cast.cpp dispatches it with dispatch_cpu_only).
template <Backend B>
void hadamard16_transpose(const ExecContext& ec, const Tensor& x, uint16_t signs, Tensor& out);

}  // namespace weft::kernels::impl
