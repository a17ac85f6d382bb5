// The precision recipe: which dtype GEMM operands and activations use, and
// how the Linear GEMMs' operands are quantized.
//
//   f32          everything f32.
//   bf16         GEMM inputs and activations bf16; f32 master weights, f32
//                accumulation inside every GEMM and reduction, f32 norm
//                statistics and softmax.
//   fp8-delayed  Transformer Engine's DelayedScaling: per-tensor FP8 scales
//                from an amax history (E4M3 forward, E5M2 gradients under the
//                HYBRID format; E4M3 everywhere as an option), the amaxes of
//                all FP8 tensors reduced over the amax group once per step.
//   fp8-current  TE's Float8CurrentScaling: per-tensor scale from the
//                current amax, reduced over the TP group.
//   fp8-block    TE's Float8BlockScaling (DeepSeek-V3's recipe): FP8 with
//                one power-of-two f32 scale per 1x128 block of activations
//                and gradients (row-wise for the forward GEMM, column-wise
//                for the backward) and per 128x128 tile of weights; E4M3
//                forward, E5M2 gradients under HYBRID (--fp8-format e4m3:
//                E4M3 everywhere, as DeepSeek-V3); nothing to reduce.
//   mxfp8        TE's MXFP8BlockScaling: E4M3 in 1x32 blocks, E8M0 scales;
//                row-wise for the forward GEMM, column-wise for the backward.
//   nvfp4        TE's NVFP4BlockScaling: E2M1 in 1x16 blocks with E4M3 block
//                scales and an f32 per-tensor scale, 16x16 blocks for weights,
//                a random Hadamard transform on the wgrad GEMM's inputs and
//                stochastic rounding of gradients.
// Only the Linear GEMMs (qkv, proj, fc1, fc2) are quantized, by the Linear's
// GemmQuantizer (gemm_quantizer.h); attention, norms, the LM head and the
// loss stay in the compute dtype, and master weights and optimizer state are
// f32. On the CPU the quantized recipes compute in f32: the operands are
// quantized exactly as the format says, dequantized (exactly) to f32 and
// multiplied with f32 accumulation — what an FP8 tensor core computes, up to
// the order of summation.
//
// Conversions happen in two places only: where a GEMM takes its inputs (the
// weight source casts the weight, the schedule casts the activation, the
// quantizer quantizes both) and where the residual stream is updated.
#pragma once

#include <string>

#include "weft/core/dtype.h"

namespace weft::parallel {

enum class Recipe : uint8_t { f32, bf16, fp8_delayed, fp8_current, mxfp8, nvfp4, fp8_block };
// "f32", "bf16", "fp8-delayed", "fp8-current", "fp8-block", "mxfp8", "nvfp4".
const char* recipe_name(Recipe r);
// Every recipe, in the order help texts list them.
inline constexpr Recipe kRecipes[] = {Recipe::f32,         Recipe::bf16,      Recipe::fp8_delayed,
                                      Recipe::fp8_current, Recipe::fp8_block, Recipe::mxfp8,
                                      Recipe::nvfp4};
// The recipes that quantize the Linear GEMMs' operands (kRecipes less f32, bf16).
inline constexpr Recipe kQuantizedRecipes[] = {Recipe::fp8_delayed, Recipe::fp8_current,
                                               Recipe::fp8_block, Recipe::mxfp8, Recipe::nvfp4};
// "f32, bf16, fp8-delayed, fp8-current, fp8-block, mxfp8 or nvfp4": for help
// texts and errors.
const char* recipe_choices();
// Inverse of recipe_name; throws weft::Error naming the choices.
Recipe parse_recipe(const std::string& name);

// TE's Format: HYBRID (E4M3 forward, E5M2 gradients) or E4M3 everywhere.
enum class Fp8Format : uint8_t { hybrid, e4m3 };
// How delayed scaling turns the amax history into the amax it scales by.
enum class AmaxAlgo : uint8_t { max, most_recent };
// The group delayed scaling reduces amaxes over: TP (under generalized
// tensor parallelism TP x GTP, the ranks of one model replica: a GTP shard
// records its rows' amax only, and gtp ranks see different data), or the
// world.
enum class AmaxGroup : uint8_t { tp, tp_dp };

// How the quantized recipes' Linear GEMMs multiply (GemmQuantizer::native_gemm):
//   automatic  FP8 tensor cores where the device has them (a GPU of compute
//              capability 8.9 or newer, the per-tensor recipes fp8-delayed and
//              fp8-current), the dequantized f32 emulation elsewhere; the
//              environment's WEFT_FP8_GEMM=emulate|native overrides it.
//   emulate    always the emulation: the operands dequantized to f32.
//   native     always kernels::quantized_gemm on the quantized operands (on the
//              CPU the same emulation behind that call, bit for bit: tests).
enum class QuantizedGemm : uint8_t { automatic, emulate, native };

struct Precision {
  Recipe recipe = Recipe::f32;
  // Delayed scaling (fp8-delayed only).
  Fp8Format fp8_format = Fp8Format::hybrid;
  int amax_history = 1024;
  AmaxAlgo amax_algo = AmaxAlgo::max;
  int margin = 0;
  AmaxGroup amax_group = AmaxGroup::tp;
  // NVFP4 (TE's disable_stochastic_rounding / disable_rht, inverted).
  bool stochastic_rounding = true;
  bool hadamard = true;
  // Under a quantized recipe: the dtype of the activations and of the
  // weights handed to the GEMMs (--dtype f32|bf16): the quantizers read it,
  // the GEMMs write it, and the unquantized GEMMs (the LM head) multiply in
  // it; the f32 and bf16 recipes ignore it.
  DType quantized_activations = DType::f32;

  // Whether the Linear GEMMs run on quantized operands.
  bool quantized() const { return recipe != Recipe::f32 && recipe != Recipe::bf16; }
  // The dtype weights are handed to the GEMMs in (quantized recipes quantize
  // that weight cast), and activations converted to before an unquantized
  // GEMM (the quantized ones quantize activations as they are; their
  // emulation multiplies dequantized f32 operands).
  DType gemm_input() const {
    if (quantized()) return quantized_activations;
    return recipe == Recipe::bf16 ? DType::bf16 : DType::f32;
  }
  // The dtype of activations between GEMMs (the residual stream included).
  DType activation() const { return gemm_input(); }
  // The recipe whose activations are `dtype` (f32 or bf16).
  static Precision of(DType dtype);
  // `r` with the default options.
  static Precision of(Recipe r);
  friend bool operator==(const Precision&, const Precision&) = default;
};

}  // namespace weft::parallel
