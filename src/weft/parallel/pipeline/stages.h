// How a model's layers split into pipeline stages: consecutive layers per
// stage, stage s on rank s % P as its chunk s / P (schedule.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft::parallel::pipeline {

// The layer count of each of `stages` stages (P·V) of a model of `layers`
// layers. `counts`: "3,5,5,3" as --pp-layers gives it, one count per stage;
// empty: balanced. Balanced, one chunk per rank (`interleaved` false),
// counts the embedding as a layer of the first stage and the head and loss
// as one of the last (Megatron's account-for-embedding/loss split), so those
// stages get a layer less where the layers allow; interleaved chunks are
// equal, and the layers must divide into them. Throws weft::Error with one
// line naming the options (--pp, --vpp, --pp-layers, --layers) and what
// would work.
std::vector<int64_t> split_layers(int64_t layers, int ranks, int virtual_stages,
                                  const std::string& counts, bool interleaved);

// The first layer of each stage and the end: boundaries[s] .. boundaries[s+1].
std::vector<int64_t> layer_boundaries(const std::vector<int64_t>& counts);

}  // namespace weft::parallel::pipeline
