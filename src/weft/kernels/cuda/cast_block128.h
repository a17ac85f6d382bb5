// fp8-block's casts on the GPU (ScalingMode::block_1x128, block_128x128):
// kernels/cuda/cast.cu hands these modes to kernels/cuda/cast_block128.cu.
// Codes, scales and amax bit for bit the CPU's (kernels/cpu/cast_block128.cpp).
// Internal to kernels/cuda/.
#pragma once

#include "weft/core/exec_context.h"
#include "weft/kernels/cast.h"

namespace weft::kernels::cuda {

void quantize_block128(const ExecContext& ec, const Tensor& x, const QuantizeConfig& cfg,
                       QuantizedTensor& q);
void dequantize_block128(const ExecContext& ec, const QuantizedTensor& q, bool columnwise,
                         Tensor& out);

}  // namespace weft::kernels::cuda
