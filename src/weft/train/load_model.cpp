#include "weft/train/load_model.h"

#include <filesystem>

#include "weft/comm/world.h"
#include "weft/core/cuda.h"
#include "weft/io/checkpoint.h"
#include "weft/io/checkpoint_dir.h"
#include "weft/io/hf_export.h"
#include "weft/io/hf_files.h"
#include "weft/train/config.h"

namespace weft::train {

void load_weights(const std::string& given, comm::ProcessGroup& world, const comm::Grid& grid,
                  nn::Gpt& model, io::ReadOptions options) {
  namespace fs = std::filesystem;
  const std::string path = io::resolve_checkpoint(given);
  std::error_code ec;
  if (fs::is_directory(path, ec) && !io::is_hf_directory(path)) {
    io::load_checkpoint(path, world, grid, model, nullptr, options);
    return;
  }
  WEFT_CHECK(fs::exists(path, ec),
             "{} does not exist: give a checkpoint directory (weft train --save), a GPT-2 "
             ".safetensors file or a Hugging Face model directory (weft checkpoint export)",
             path);
  io::load_hf(path, model, options.allow_nonfinite);
}

InferenceModel load_for_inference(const std::string& given, DType compute, io::ReadOptions options,
                                  Device device) {
  const std::string path = io::resolve_checkpoint(given);
  InferenceModel m;
  const io::Json config = read_checkpoint_config(path);
  TrainConfig cfg;
  apply_settings(cfg, shape_settings(config), path);
  cfg.tp = 1;
  cfg.precision.recipe = parallel::Precision::of(compute).recipe;
  cfg.device = device.str();
  if (device.is_cuda()) cuda::check_device(device);
  m.world = comm::init_world();
  WEFT_CHECK(m.world->size() == 1,
             "evaluation and generation run on one process: start weft without mpirun");
  m.grid = std::make_unique<comm::Grid>(
      *m.world, "tp-dp", std::vector<std::pair<std::string, int>>{{"tp", 1}, {"dp", 1}});
  m.model = std::make_unique<nn::Gpt>(model_context(cfg, nullptr), model_config(cfg));
  load_weights(path, *m.world, *m.grid, *m.model, options);
  return m;
}

InferenceModel load_for_inference(const std::string& given, comm::ProcessGroup& world,
                                  DType compute, io::ReadOptions options,
                                  const std::string& cp_comm) {
  const std::string path = io::resolve_checkpoint(given);
  InferenceModel m;
  TrainConfig cfg;
  apply_settings(cfg, shape_settings(read_checkpoint_config(path)), path);
  cfg.tp = 1;
  cfg.cp = world.size();
  cfg.cp_comm = cp_comm;
  cfg.precision.recipe = parallel::Precision::of(compute).recipe;
  WEFT_CHECK(cfg.model.seq % (2 * cfg.cp) == 0,
             "--cp {} cuts each window into 2·cp = {} chunks, which the checkpoint's context of {} "
             "positions does not divide: choose a --cp whose 2·cp divides {}",
             cfg.cp, 2 * cfg.cp, cfg.model.seq, cfg.model.seq);
  validate(cfg);  // --cp-comm against the checkpoint's heads
  m.grid = std::make_unique<comm::Grid>(
      world, "tp-cp-dp",
      std::vector<std::pair<std::string, int>>{{"tp", 1}, {"cp", cfg.cp}, {"dp", 1}});
  m.model = std::make_unique<nn::Gpt>(
      model_context(cfg, nullptr, nullptr, nullptr, nullptr, m.grid->group_ptr("cp")),
      model_config(cfg));
  load_weights(path, world, *m.grid, *m.model, options);
  return m;
}

}  // namespace weft::train
