// The residual adds fused with the norms after them (nn/transformer_layer.h):
// a stack of layers that each run the norm reading their output (the next
// layer's ln_1, the final norm for the last) inside their last residual add,
// as Gpt runs them, gives bit for bit what the layers and the final norm give
// run one after the other: outputs, input gradients and every parameter's
// gradient, with dropout on and for GPT-2, Llama and MoE blocks.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "bitwise.h"
#include "contexts.h"
#include "testing.h"
#include "weft/nn/norm.h"
#include "weft/nn/transformer_layer.h"
#include "weft/parallel/rng.h"

namespace weft::nn::testing {
namespace {

using weft::testing::bitwise_equal;
using weft::testing::random_tensor;

constexpr int64_t B = 2, T = 5, C = 16, H = 4;

struct Stack {
  std::vector<std::unique_ptr<TransformerLayer>> layers;
  std::unique_ptr<Norm> final;

  std::vector<Parameter*> parameters() {
    std::vector<Parameter*> out;
    for (auto& l : layers) {
      for (Parameter* p : l->parameters()) out.push_back(p);
    }
    for (Parameter* p : final->parameters()) out.push_back(p);
    return out;
  }
};

// Three layers of `base` (layer `moe_layer` a MoE one) and a final norm.
Stack make_stack(const TransformerLayerConfig& base, int moe_layer = -1) {
  auto pc = ctx_of(nullptr, SequenceParallel::off, DType::f32, 9);
  Stack s;
  for (int i = 0; i < 3; ++i) {
    TransformerLayerConfig c = base;
    c.name = format("h.{}", i);
    if (i == moe_layer) c.moe_experts = 4;
    s.layers.push_back(std::make_unique<TransformerLayer>(pc, c));
  }
  s.final = std::make_unique<Norm>(base.norm, pc, NormConfig{.name = "ln_f", .width = C});
  return s;
}

struct Result {
  Tensor y, dx;
};

// Forward (fused across layers, or layer by layer) and backward of Σ w·y.
Result run(Stack& s, bool fused, const Tensor& x, const Tensor& w) {
  parallel::RngTracker rng(7, 0);
  Ctx ctx(&rng);
  Result r;
  if (fused) {
    TransformerLayer::Stream st{x, {}};
    for (size_t i = 0; i < s.layers.size(); ++i) {
      Norm* next = i + 1 < s.layers.size() ? s.layers[i + 1]->input_norm() : s.final.get();
      EXPECT_NE(next, nullptr);
      st = s.layers[i]->forward_stream(ctx, st, next);
    }
    r.y = st.normed;
  } else {
    Tensor h = x;
    for (auto& l : s.layers) h = l->forward(ctx, h);
    r.y = s.final->forward(ctx, h);
  }
  Tensor d = s.final->backward(ctx, w);
  for (auto it = s.layers.rbegin(); it != s.layers.rend(); ++it) d = (*it)->backward(ctx, d);
  r.dx = d;
  return r;
}

void expect_fusion_is_exact(const TransformerLayerConfig& cfg, int moe_layer = -1) {
  const Tensor x = random_tensor({B, T, C}, 1), w = random_tensor({B, T, C}, 2);
  Stack fused = make_stack(cfg, moe_layer), plain = make_stack(cfg, moe_layer);
  const Result a = run(fused, true, x, w), b = run(plain, false, x, w);
  EXPECT_TRUE(bitwise_equal(b.y, a.y));
  EXPECT_TRUE(bitwise_equal(b.dx, a.dx));
  std::vector<Parameter*> pa = fused.parameters(), pb = plain.parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    SCOPED_TRACE(pa[i]->name);
    EXPECT_TRUE(bitwise_equal(pb[i]->grad, pa[i]->grad));
  }
}

TransformerLayerConfig gpt2_layer() {
  return {.width = C,
          .heads = H,
          .layers = 3,
          .attention_dropout = 0.2f,
          .hidden_dropout = 0.3f,
          .init_std = 0.3f};
}

TransformerLayerConfig llama_layer() {
  TransformerLayerConfig c = gpt2_layer();
  c.kv_heads = 2;
  c.hidden = 24;
  c.norm = NormKind::rms;
  c.mlp = MlpKind::swiglu;
  c.bias = false;
  c.rotary = true;
  c.max_positions = T;
  return c;
}

TEST(ResidualFusion, Gpt2StackEqualsLayerByLayer) { expect_fusion_is_exact(gpt2_layer()); }

TEST(ResidualFusion, Gpt2StackWithoutDropoutEqualsLayerByLayer) {
  TransformerLayerConfig c = gpt2_layer();
  c.attention_dropout = c.hidden_dropout = 0.0f;
  expect_fusion_is_exact(c);
}

TEST(ResidualFusion, LlamaStackEqualsLayerByLayer) { expect_fusion_is_exact(llama_layer()); }

// A MoE layer runs its own ln_2 (no fusion inside it); the adds around it
// still fuse with the next norm.
TEST(ResidualFusion, StackWithAMoeLayerEqualsLayerByLayer) {
  expect_fusion_is_exact(llama_layer(), 1);
}

TEST(ResidualFusion, DropoutMasksAreTheLayerByLayerOnes) {
  const Tensor x = random_tensor({B, T, C}, 3);
  Stack fused = make_stack(gpt2_layer()), plain = make_stack(gpt2_layer());
  parallel::RngTracker rng_a(11, 0), rng_b(11, 0);
  Ctx a(&rng_a), b(&rng_b);
  TransformerLayer::Stream st =
      fused.layers[0]->forward_stream(a, {x, {}}, fused.layers[1]->input_norm());
  plain.layers[0]->forward(b, x);
  const TransformerLayer::DropoutMasks ma = fused.layers[0]->dropout_masks(a),
                                       mb = plain.layers[0]->dropout_masks(b);
  ASSERT_TRUE(ma.attn.defined() && ma.mlp.defined());
  EXPECT_TRUE(bitwise_equal(mb.attn, ma.attn));
  EXPECT_TRUE(bitwise_equal(mb.mlp, ma.mlp));
  EXPECT_TRUE(st.normed.defined());
}

TEST(ResidualFusion, NormalizedInputNeedsAnInputNorm) {
  Stack s = make_stack(gpt2_layer());
  Ctx ctx;
  const Tensor x = random_tensor({B, T, C}, 4);
  // A normalized input of the wrong width is the attention's error.
  const std::string e = weft::testing::error_of([&] {
    s.layers[0]->forward_stream(ctx, {x, random_tensor({B, T, C + 1}, 5)}, nullptr);
  });
  EXPECT_NE(e.find("attention input"), std::string::npos) << e;
}

}  // namespace
}  // namespace weft::nn::testing
