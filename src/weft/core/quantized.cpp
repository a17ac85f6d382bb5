#include "weft/core/quantized.h"

namespace weft {

const char* scaling_mode_name(ScalingMode m) {
  switch (m) {
    case ScalingMode::tensor: return "tensor";
    case ScalingMode::block_1x32: return "1x32";
    case ScalingMode::block_1x16: return "1x16";
    case ScalingMode::block_16x16: return "16x16";
    case ScalingMode::block_1x128: return "1x128";
    case ScalingMode::block_128x128: return "128x128";
  }
  return "?";
}

int64_t scaling_block_cols(ScalingMode m) {
  switch (m) {
    case ScalingMode::tensor: return 1;
    case ScalingMode::block_1x32: return 32;
    case ScalingMode::block_1x16:
    case ScalingMode::block_16x16: return 16;
    case ScalingMode::block_1x128:
    case ScalingMode::block_128x128: return 128;
  }
  return 1;
}

int64_t scaling_block_rows(ScalingMode m) {
  switch (m) {
    case ScalingMode::block_16x16: return 16;
    case ScalingMode::block_128x128: return 128;
    default: return 1;
  }
}

Shape scale_shape(ScalingMode m, int64_t rows, int64_t cols) {
  if (m == ScalingMode::tensor) return {1};
  const int64_t bc = scaling_block_cols(m), br = scaling_block_rows(m);
  return {(rows + br - 1) / br, (cols + bc - 1) / bc};
}

DType scale_dtype(ScalingMode m) {
  switch (m) {
    case ScalingMode::tensor: return DType::f32;
    case ScalingMode::block_1x32: return DType::e8m0;
    case ScalingMode::block_1x16:
    case ScalingMode::block_16x16: return DType::e4m3;
    case ScalingMode::block_1x128:
    case ScalingMode::block_128x128: return DType::f32;
  }
  return DType::f32;
}

float dtype_max(DType t) {
  switch (t) {
    case DType::e4m3: return 448.0f;
    case DType::e5m2: return 57344.0f;
    case DType::e2m1: return 6.0f;
    default: WEFT_FAIL("{} is not a low-precision element type", dtype_name(t));
  }
}

int64_t QuantizedTensor::storage_bytes() const {
  int64_t n = 0;
  for (const Tensor* t : {&data, &scale_inv, &col_data, &col_scale_inv}) {
    if (t->defined()) n += t->nbytes();
  }
  return n + static_cast<int64_t>(sizeof(float));
}

}  // namespace weft
