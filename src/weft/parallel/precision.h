// The precision recipe: which dtype GEMM operands and activations use.
//
//   f32    everything f32.
//   bf16   GEMM inputs and activations bf16; f32 master weights, f32
//          accumulation inside every GEMM and reduction, f32 norm statistics
//          and softmax.
//
// Conversions happen in two places only: where a GEMM takes its inputs (the
// weight source casts the weight, the schedule casts the activation) and
// where the residual stream is updated. The low-precision issue adds the FP8
// recipes (delayed and current scaling, MXFP8, NVFP4) here: a recipe that
// quantizes GEMM operands brings its own weight source and scaling state.
#pragma once

#include "weft/core/dtype.h"

namespace weft::parallel {

enum class Recipe : uint8_t { f32, bf16 };

struct Precision {
  Recipe recipe = Recipe::f32;

  // The dtype GEMM operands are converted to.
  DType gemm_input() const { return recipe == Recipe::bf16 ? DType::bf16 : DType::f32; }
  // The dtype of activations between GEMMs (the residual stream included).
  DType activation() const { return gemm_input(); }
  // The recipe whose activations are `dtype` (f32 or bf16).
  static Precision of(DType dtype);
  friend bool operator==(const Precision&, const Precision&) = default;
};

}  // namespace weft::parallel
