// Hugging Face model files around real weights (a tiny model exported by
// fixtures.h): the input is config.json, then, after a NUL byte, the shard
// index model.safetensors.index.json (without one, the real index stays).
// config.json goes into the sharded model directory and next to the lone
// .safetensors file. Runs what reads them: hf_config (the model shape,
// `weft checkpoint inspect`), load_for_inference (eval, generate, --init) and
// import_hf (`weft checkpoint import`), for the directory and for the file,
// of a GPT-2 and of a Llama export.
#include <filesystem>
#include <fstream>
#include <iterator>

#include "fixtures.h"
#include "fuzz.h"
#include "weft/train/load_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace wt = weft::train;
  static const std::string root = [] {
    weft::set_num_threads(1);
    const std::string r = weft::fuzz::scratch_dir();
    weft::fuzz::save_tiny_checkpoint(r + "/ckpt");
    weft::fuzz::save_tiny_hf(r + "/ckpt", r);
    weft::fuzz::save_tiny_checkpoint(r + "/llama-ckpt", weft::fuzz::tiny_llama_config());
    weft::fuzz::save_tiny_hf(r + "/llama-ckpt", r + "/llama");
    return r;
  }();
  auto read_index = [](const std::string& models) {
    std::ifstream in(models + "/model/model.safetensors.index.json", std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  static const std::string real_index = read_index(root),
                           real_llama_index = read_index(root + "/llama");
  const auto parts = weft::fuzz::split({reinterpret_cast<const char*>(data), size}, '\0', 2);
  for (const auto& [models, index] :
       {std::pair{root, &real_index}, std::pair{root + "/llama", &real_llama_index}}) {
    const std::string dir = models + "/model", file = models + "/file/model.safetensors";
    weft::fuzz::write_file(dir + "/config.json", parts[0]);
    weft::fuzz::write_file(models + "/file/config.json", parts[0]);
    weft::fuzz::write_file(dir + "/model.safetensors.index.json",
                           parts.size() > 1 ? parts[1] : std::string_view(*index));
    for (const std::string& model : {dir, file}) {
      weft::fuzz::refused_ok([&] { (void)weft::io::hf_config(model); });
      weft::fuzz::refused_ok([&] { (void)wt::load_for_inference(model, weft::DType::f32); });
      weft::fuzz::refused_ok([&] { weft::io::import_hf(model, root + "/imported", 1337); });
    }
  }
  return 0;
}
