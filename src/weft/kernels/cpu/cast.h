// The CPU implementations of kernels/cast.h; callers go through
// kernels/cast.h, which checks the devices and dispatches here.
#pragma once

#include "weft/kernels/cast.h"

namespace weft::kernels::cpu {

float amax(const ExecContext& ec, const Tensor& x);
void quantize(const ExecContext& ec, const Tensor& x, const QuantizeConfig& cfg,
              QuantizedTensor& q);
void dequantize(const ExecContext& ec, const QuantizedTensor& q, bool columnwise, Tensor& out);
void hadamard16_transpose(const ExecContext& ec, const Tensor& x, uint16_t signs, Tensor& out);

}  // namespace weft::kernels::cpu
