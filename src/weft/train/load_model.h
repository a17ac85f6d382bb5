// Loading a model's weights: into a model already built (a run's --init), or
// a model built and loaded for evaluation and generation (weft eval,
// weft generate).
#pragma once

#include <memory>
#include <string>

#include "weft/comm/grid.h"
#include "weft/comm/process_group.h"
#include "weft/core/device.h"
#include "weft/core/dtype.h"
#include "weft/io/checkpoint_format.h"
#include "weft/nn/gpt.h"

namespace weft::train {

// Loads weights into `model` (collective over `world`, any layout): a
// checkpoint directory (parameters only) or a GPT-2 .safetensors file.
// options.allow_nonfinite lets NaN and infinite values through.
void load_weights(const std::string& path, comm::ProcessGroup& world, const comm::Grid& grid,
                  nn::Gpt& model, io::ReadOptions options = {});

// A model restored for evaluation or generation: TP=1 on the calling thread
// (all of this process's cores) or on one GPU, its shape read from the
// checkpoint.
struct InferenceModel {
  std::shared_ptr<comm::ProcessGroup> world{};
  std::unique_ptr<comm::Grid> grid{};
  std::unique_ptr<nn::Gpt> model{};
};
// `path`: a checkpoint directory or a GPT-2 .safetensors file.
InferenceModel load_for_inference(const std::string& path, DType compute = DType::f32,
                                  io::ReadOptions options = {}, Device device = Device::cpu());
// The same with `world` as a context-parallel group (weft eval --cp): every
// rank holds the whole model and its chunks of each sequence (collective
// over `world`, on the host).
InferenceModel load_for_inference(const std::string& path, comm::ProcessGroup& world,
                                  DType compute = DType::f32, io::ReadOptions options = {},
                                  const std::string& cp_comm = "p2p");

}  // namespace weft::train
