#include "weft/nn/layernorm_mlp.h"

#include "weft/core/cuda.h"
#include "weft/kernels/activation.h"

namespace weft::nn {

const char* mlp_kind_name(MlpKind k) { return k == MlpKind::swiglu ? "swiglu" : "gelu"; }

MlpKind parse_mlp_kind(const std::string& name) {
  if (name == "gelu") return MlpKind::gelu;
  if (name == "swiglu") return MlpKind::swiglu;
  WEFT_FAIL("unknown MLP '{}': use gelu or swiglu", name);
}

LayerNormMLPConfig LayerNormMLP::checked(LayerNormMLPConfig cfg) {
  WEFT_CHECK(cfg.width > 0, "{}: LayerNormMLP needs a positive width, got {}", cfg.name, cfg.width);
  if (cfg.hidden == 0) cfg.hidden = 4 * cfg.width;
  WEFT_CHECK(cfg.hidden > 0, "{}: LayerNormMLP needs a positive hidden size, got {}", cfg.name,
             cfg.hidden);
  WEFT_CHECK(cfg.layers >= 1, "{}: layers (for the fc2 init scale) must be >= 1, got {}", cfg.name,
             cfg.layers);
  return cfg;
}

LayerNormMLP::LayerNormMLP(ContextPtr context, LayerNormMLPConfig cfg)
    : Module(cfg.name),
      pc_(std::move(context)),
      cfg_(checked(std::move(cfg))),
      fc1_(pc_, {.name = cfg_.name + ".fc1",
                 .norm_name = cfg_.norm_name,
                 .in = cfg_.width,
                 .out = gated() ? 2 * cfg_.hidden : cfg_.hidden,
                 .mode = cfg_.partition == Partition::tensor ? Parallel::column : Parallel::none,
                 .bias = cfg_.bias,
                 .norm = cfg_.norm,
                 .eps = cfg_.eps,
                 .init_std = cfg_.init_std,
                 .groups = gated() ? 2 : 1,
                 .return_layernorm_output = false,
                 .overlap_name = "fc1"}),
      fc2_(pc_,
           residual_projection(cfg_.partition == Partition::tensor, cfg_.name + ".fc2", cfg_.hidden,
                               cfg_.width, cfg_.init_std, cfg_.layers, "fc2", cfg_.bias)) {}

Tensor LayerNormMLP::forward(Ctx& ctx, const Tensor& x) {
  const cuda::NvtxRange nvtx(name() + " forward");
  return forward_normed(ctx, norm().forward(ctx, x));
}

Tensor LayerNormMLP::backward(Ctx& ctx, const Tensor& dy) {
  const cuda::NvtxRange nvtx(name() + " backward");
  return norm().backward(ctx, backward_normed(ctx, dy));
}

// fc1 + GELU, measured on the 2-core Zen 4 VM (one thread, f32, medians of 3,
// load average ~10 from other work; GPT-2 tiny's 2048 x 128 -> 512 and GPT-2
// small's 256 x 768 -> 3072), in ms:
//                                               tiny     small
//   matmul + bias (the pre-activation)          5.07     22.6
//   then the GELU pass                          0.66      0.54
//   matmul + bias + GELU post-op                6.18     24.0
//   backward's GELU pass                        0.96      0.63
// The post-op was slower than the matmul and the pass together, and, with
// only the activation written, backward would need the fc1 GEMM again (5.07,
// 22.6) for the pre-activation; so fc1 writes the pre-activation and the pass
// follows. (oneDNN's eltwise GELU took 1.10 / 0.71 forward and 1.61 / 0.82
// backward in the same runs; kernels/cpu/activation.cpp has the loops.)
//
// On a GPU cuBLASLt writes both: fc1's GEMM takes GELU in its epilogue
// (GELU_AUX_BIAS: the activation and the pre-activation), and backward's
// fc2 dgrad GEMM the GELU gradient and fc1's bias gradient (DGELU_BGRAD),
// where Linear::forward_gelu / backward_gelu find them applicable (bf16, no
// quantized recipe, no collective splitting the GEMM); the CPU, and the GPU
// elsewhere, run exactly the sequence above.
Tensor LayerNormMLP::forward_normed(Ctx& ctx, const Tensor& n) {
  Saved& s = ctx.saved<Saved>(this);
  if (!gated()) {
    Linear::Activated h = fc1_.linear().forward_gelu(ctx, n);
    s.h = h.pre;
    return fc2_.forward(ctx, h.act);
  }
  s.h = fc1_.forward_normed(ctx, n);
  Shape as = s.h.shape();
  as[as.rank() - 1] /= 2;
  Tensor a = pc_->exec.empty(as, s.h.dtype(), MemoryTag::activations);
  kernels::swiglu_forward(pc_->exec, s.h, a);
  return fc2_.forward(ctx, a);
}

Tensor LayerNormMLP::backward_normed(Ctx& ctx, const Tensor& dy) {
  Saved& s = ctx.saved<Saved>(this);
  WEFT_CHECK(s.h.defined(), "{}: backward without a forward in this context", cfg_.name);
  Tensor h = s.h;
  ctx.release(this);
  if (!gated()) {
    Parameter* b1 = fc1_.linear().bias();
    const Linear::GeluGrad g = fc2_.backward_gelu(ctx, dy, h, b1 ? &b1->grad : nullptr);
    if (g.bias_grad_done) return fc1_.linear().backward_without_bias_grad(ctx, g.dpre);
    return fc1_.backward_normed(ctx, g.dpre);
  }
  Tensor da = fc2_.backward(ctx, dy);
  Tensor dh = pc_->exec.empty(h.shape(), h.dtype(), MemoryTag::activations);
  kernels::swiglu_backward(pc_->exec, da, h, dh);
  return fc1_.backward_normed(ctx, dh);
}

}  // namespace weft::nn
