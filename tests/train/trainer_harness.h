// The trainer tests' shared pieces: a small text, a tiny configuration, a
// run on local ranks that collects losses, norms and the whole parameters
// (assembled from every rank's slices, TP and GTP), and the comparison of
// two runs at fp32 tolerance.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "testing.h"
#include "weft/comm/local.h"
#include "weft/core/threads.h"
#include "weft/io/tokenizer.h"
#include "weft/train/trainer.h"

namespace weft::train {

// A few thousand bytes of varied English text: enough windows of 16 tokens.
inline io::TokenData test_text() {
  const char* words[] = {"the ",  "quick ", "brown ", "fox ",   "jumps ", "over ",
                         "a ",    "lazy ",  "dog ",   "while ", "seven ", "wizards ",
                         "hum. ", "Then ",  "every ", "cat ",   "naps.\n"};
  std::string text;
  uint64_t x = 7;
  while (text.size() < 6000) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    text += words[(x >> 33) % std::size(words)];
  }
  return io::text_tokens(text, "test text");
}

inline TrainConfig tiny_config() {
  TrainConfig c;
  c.model.layers = 2;
  c.model.width = 32;
  c.model.heads = 4;
  c.model.seq = 16;
  c.model.vocab = 256;
  c.tp = 1;
  c.micro_batch = 4;
  c.steps = 4;
  c.lr = 1e-3;
  c.warmup = 1;
  c.eval_batches = 2;
  c.sample_tokens = 0;
  return c;
}

struct FullParam {
  Shape shape;
  std::vector<float> values;
};

struct RunResult {
  std::vector<double> losses;
  std::vector<double> grad_norms;  // before clipping: catches a gradient scaled by mistake
  double val_loss = 0;
  std::map<std::string, FullParam> params;  // whole tensors, assembled from the TP slices
};

// Writes a rank's slice of `p` into the whole tensor it belongs to.
inline void place(const nn::Parameter& p, FullParam& full) {
  const Shape& g = p.spec.global_shape;
  if (full.values.empty()) {
    full.shape = g;
    full.values.assign(static_cast<size_t>(g.numel()), 0.0f);
  }
  // Without row padding: its rows are rows [row_offset, +row_length) of the TP-level slice.
  std::vector<float> local = nn::unpadded(p.spec, p.value).to_vector();
  const int64_t first_row = p.spec.rows_split() ? p.spec.row_offset : 0;
  if (!p.spec.is_split()) {
    const int64_t inner = g.numel() / (g.rank() ? g[0] : 1);
    std::copy(local.begin(), local.end(), full.values.begin() + first_row * inner);
    return;
  }
  ASSERT_LE(g.rank(), 2);
  const int d = p.spec.split_dim;
  const int64_t cols = g.rank() == 2 ? g[1] : 1;
  const int64_t block = g[d] / p.spec.blocks;
  // The blocks it holds (all of them unless a shared slice's, ShardSpec::shared).
  const std::vector<int64_t> held = p.spec.held_blocks();
  const int64_t local_cols = d == 1 ? static_cast<int64_t>(held.size()) * p.spec.length : cols;
  auto global_index = [&](int64_t i) {  // local index along d -> global
    return held[static_cast<size_t>(i / p.spec.length)] * block + p.spec.offset + i % p.spec.length;
  };
  const int64_t local_rows = static_cast<int64_t>(local.size()) / local_cols;
  for (int64_t r = 0; r < local_rows; ++r) {
    const int64_t tr = first_row + r;  // row of the TP-level slice
    for (int64_t c = 0; c < local_cols; ++c) {
      const int64_t gr = d == 0 ? global_index(tr) : tr, gc = d == 1 ? global_index(c) : c;
      full.values[static_cast<size_t>(gr * cols + gc)] =
          local[static_cast<size_t>(r * local_cols + c)];
    }
  }
}

// Trains cfg.steps steps on tp · cp · ep · gtp · pp · dp local ranks; losses and the final whole
// parameters.
inline RunResult run(const TrainConfig& cfg, const io::Dataset& data, int dp = 1) {
  RunResult out;
  std::mutex mu;
  comm::run_local(cfg.tp * cfg.cp * cfg.ep * cfg.gtp * cfg.pp * dp, [&](comm::ProcessGroup& world) {
    set_num_threads(1);
    Trainer t(cfg, world, data);
    std::vector<double> losses, norms;
    while (t.steps_done() < cfg.steps) {
      const StepResult r = t.step();
      losses.push_back(r.loss);
      norms.push_back(r.grad_norm);
    }
    const double val = t.evaluate();
    std::lock_guard<std::mutex> lock(mu);
    if (world.rank() == 0) {
      out.losses = losses;
      out.grad_norms = norms;
      out.val_loss = val;
    }
    if (t.grid().rank_in("dp") == 0) {
      // Every pipeline chunk of this rank (the model itself without --pp).
      for (int v = 0; v < cfg.vpp; ++v) {
        for (nn::Parameter* p : t.chunk(v).parameters()) place(*p, out.params[p->name]);
      }
    }
  });
  return out;
}

// Losses at fp32 tolerance. Parameters: AdamW divides every gradient by its
// own running RMS, so an element whose gradient is as small as eps (1e-8; a
// byte the text never holds) moves by about lr whatever its exact value, and
// the rounding noise of a different reduction order shows up as a fraction
// of lr: parameters are compared at 2% of one step's largest update.
inline void expect_close(const RunResult& a, const RunResult& b, double lr) {
  constexpr double kRel = 1e-5;
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t i = 0; i < a.losses.size(); ++i) {
    EXPECT_NEAR(a.losses[i], b.losses[i], kRel * std::abs(a.losses[i])) << "step " << i + 1;
  }
  ASSERT_EQ(a.grad_norms.size(), b.grad_norms.size());
  for (size_t i = 0; i < a.grad_norms.size(); ++i) {
    EXPECT_NEAR(a.grad_norms[i], b.grad_norms[i], kRel * std::abs(a.grad_norms[i]))
        << "grad norm, step " << i + 1;
  }
  EXPECT_NEAR(a.val_loss, b.val_loss, kRel * std::abs(a.val_loss));
  ASSERT_EQ(a.params.size(), b.params.size());
  for (const auto& [name, pa] : a.params) {
    const FullParam& pb = b.params.at(name);
    ASSERT_EQ(pa.shape, pb.shape) << name;
    EXPECT_TRUE(testing::close(std::vector<double>(pa.values.begin(), pa.values.end()), pb.values,
                               {kRel, 2e-2 * lr}))
        << name;
  }
}

}  // namespace weft::train
