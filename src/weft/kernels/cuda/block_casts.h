// The block-scaled casts on the GPU, which kernels/cuda/cast.cu hands their
// modes to: fp8-block's 1x128 blocks and 128x128 tiles (cast_block128.cu) and
// MXFP8's 1x32 blocks (cast_mxfp8.cu). Codes, scales and amax bit for bit the
// CPU's. Internal to kernels/cuda/.
#pragma once

#include "weft/core/exec_context.h"
#include "weft/kernels/cast.h"

namespace weft::kernels::cuda {

void quantize_block128(const ExecContext& ec, const Tensor& x, const QuantizeConfig& cfg,
                       QuantizedTensor& q);
void dequantize_block128(const ExecContext& ec, const QuantizedTensor& q, bool columnwise,
                         Tensor& out);
void quantize_mxfp8(const ExecContext& ec, const Tensor& x, const QuantizeConfig& cfg,
                    QuantizedTensor& q);
void dequantize_mxfp8(const ExecContext& ec, const QuantizedTensor& q, bool columnwise,
                      Tensor& out);

}  // namespace weft::kernels::cuda
