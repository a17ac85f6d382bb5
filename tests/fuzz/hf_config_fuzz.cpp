// The Hugging Face config.json next to a GPT-2 .safetensors file: the input
// is config.json, the weights are a real export of a tiny model. Runs what
// reads it: hf_config (the model shape, `weft checkpoint inspect`),
// load_for_inference (eval/generate/--init with the file) and import_hf
// (`weft checkpoint import`).
#include <filesystem>

#include "fixtures.h"
#include "fuzz.h"
#include "weft/train/trainer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace wt = weft::train;
  static const std::string dir = [] {
    weft::set_num_threads(1);
    const std::string root = weft::fuzz::scratch_dir();
    weft::fuzz::save_tiny_checkpoint(root + "/ckpt");
    std::filesystem::create_directory(root + "/hf");
    weft::fuzz::save_tiny_hf(root + "/ckpt", root + "/hf");
    return root + "/hf";
  }();
  const std::string file = dir + "/model.safetensors";
  weft::fuzz::write_file(dir + "/config.json", {reinterpret_cast<const char*>(data), size});

  weft::fuzz::refused_ok([&] { (void)wt::hf_config(file); });
  weft::fuzz::refused_ok([&] { (void)wt::load_for_inference(file, weft::DType::f32); });
  weft::fuzz::refused_ok(
      [&] { wt::import_hf(file, weft::fuzz::scratch_dir() + "/imported", 1337); });
  return 0;
}
