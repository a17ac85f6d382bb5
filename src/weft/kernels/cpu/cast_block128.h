// fp8-block's casts on the CPU (ScalingMode::block_1x128 and block_128x128,
// kernels/cast.h): kernels/cpu/cast.cpp and cast_dequant.cpp hand these
// modes here. Internal to those files and their tests.
#pragma once

#include "weft/core/exec_context.h"
#include "weft/kernels/cast.h"

namespace weft::kernels::cpu {

inline bool is_block128(ScalingMode m) {
  return m == ScalingMode::block_1x128 || m == ScalingMode::block_128x128;
}

void quantize_block128(const ExecContext& ec, const Tensor& x, const QuantizeConfig& cfg,
                       QuantizedTensor& q);
void dequantize_block128(const ExecContext& ec, const QuantizedTensor& q, bool columnwise,
                         Tensor& out);

}  // namespace weft::kernels::cpu
