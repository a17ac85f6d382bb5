// Random tokens for the benchmarks that time training steps: a step's cost
// does not depend on what the text says.
#pragma once

#include "weft/io/data.h"
#include "weft/train/config.h"

namespace weft {

// At least 64 windows of the model's context, tokens uniform over its vocabulary.
io::Dataset synthetic_data(const train::TrainConfig& cfg);

}  // namespace weft
