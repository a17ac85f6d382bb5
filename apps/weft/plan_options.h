// What `weft plan` and `weft train --layout auto` share: the model-shape
// options of a plan and the search behind the automatic layout.
#pragma once

#include <cstdint>
#include <string>

#include "cli.h"
#include "weft/plan/search.h"
#include "weft/train/config.h"

namespace weft {

// --preset and the shape options (layers, width, heads, kv-heads, hidden,
// vocab, seq, moe-experts, moe-top-k, dropout), as weft train spells them.
void add_shape_options(cli::Options& opts);
// The configuration they describe, its --dtype (default f32, bf16 when
// `gpu`) applied.
train::TrainConfig shape_config(const cli::Options& opts, bool gpu);

// The fastest layout of `world` ranks for `cfg`'s model at `global_batch`
// sequences per step within `memory_limit` bytes per rank (0: none), on
// this CPU or cfg's GPU (the default cluster's figures); a weft::Error
// naming the smallest layout's need when none fits.
plan::PlannedLayout pick_layout(const train::TrainConfig& cfg, int world, int64_t global_batch,
                                int64_t memory_limit, const std::string& limit_text);

}  // namespace weft
