#include "weft/parallel/precision.h"

#include "weft/core/error.h"

namespace weft::parallel {

const char* recipe_name(Recipe r) {
  switch (r) {
    case Recipe::f32: return "f32";
    case Recipe::bf16: return "bf16";
    case Recipe::fp8_delayed: return "fp8-delayed";
    case Recipe::fp8_current: return "fp8-current";
    case Recipe::fp8_block: return "fp8-block";
    case Recipe::mxfp8: return "mxfp8";
    case Recipe::nvfp4: return "nvfp4";
  }
  return "?";
}

const char* recipe_choices() {
  return "f32, bf16, fp8-delayed, fp8-current, fp8-block, mxfp8 or nvfp4";
}

Recipe parse_recipe(const std::string& name) {
  for (Recipe r : kRecipes) {
    if (name == recipe_name(r)) return r;
  }
  WEFT_FAIL("unknown precision '{}': use {}", name, recipe_choices());
}

Precision Precision::of(DType dtype) {
  WEFT_CHECK(dtype == DType::f32 || dtype == DType::bf16,
             "no precision recipe computes in {}: use f32 or bf16", dtype_name(dtype));
  return of(dtype == DType::bf16 ? Recipe::bf16 : Recipe::f32);
}

Precision Precision::of(Recipe r) {
  Precision p;
  p.recipe = r;
  return p;
}

}  // namespace weft::parallel
