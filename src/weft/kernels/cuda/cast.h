// The CUDA implementations of kernels/cast.h, per-tensor FP8 scaling only
// (ScalingMode::tensor, e4m3 / e5m2): the codes are bit for bit the CPU's.
// The block-scaled modes (MXFP8, NVFP4, stochastic rounding) throw
// weft::Error saying they have no CUDA kernel yet. quantize and amax return
// an amax to the host, so they synchronize with the context's stream.
#pragma once

#include "weft/kernels/cast.h"

namespace weft::kernels::cuda {

float amax(const ExecContext& ec, const Tensor& x);
void quantize(const ExecContext& ec, const Tensor& x, const QuantizeConfig& cfg,
              QuantizedTensor& q);
void dequantize(const ExecContext& ec, const QuantizedTensor& q, bool columnwise, Tensor& out);

}  // namespace weft::kernels::cuda
