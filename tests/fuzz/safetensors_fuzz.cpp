// The safetensors reader (train/safetensors.h): the input is the file. Opens
// it (header validation), then every load path over every tensor (whole,
// slices of every dimension, rows), and loads it as a Hugging Face GPT-2 file
// (hf_config and load_hf through load_for_inference), as --init, eval and
// generate do with a .safetensors file.
#include <algorithm>

#include "fuzz.h"
#include "weft/core/threads.h"
#include "weft/io/safetensors.h"
#include "weft/train/load_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace wt = weft::train;
  static const bool once = (weft::set_num_threads(1), true);
  (void)once;
  const std::string path = weft::fuzz::scratch_dir() + "/model.safetensors";
  weft::fuzz::write_file(path, {reinterpret_cast<const char*>(data), size});

  weft::fuzz::refused_ok([&] {
    const weft::io::SafetensorsFile f(path);
    for (const auto& [k, v] : f.metadata()) (void)(k.size() + v.size());
    size_t tried = 0;
    for (const weft::io::TensorInfo& t : f.tensors()) {
      if (++tried > 16) break;
      (void)weft::io::dtype_from_safetensors(t.dtype);
      if (&f.info(t.name) != &t || f.find(t.name) != &t) std::abort();
      weft::fuzz::refused_ok([&] { (void)f.load(t.name); });
      weft::fuzz::refused_ok([&] { (void)f.load_rows(t.name, 0, 1); });
      for (int dim = -1; dim <= static_cast<int>(t.shape.size()); ++dim) {
        const int64_t extent = dim >= 0 && dim < static_cast<int>(t.shape.size())
                                   ? t.shape[static_cast<size_t>(dim)]
                                   : 1;
        weft::fuzz::refused_ok([&] { (void)f.load_slice(t.name, dim, 0, extent); });
        weft::fuzz::refused_ok(
            [&] { (void)f.load_slice(t.name, dim, extent / 2, extent - extent / 2); });
        weft::fuzz::refused_ok([&] { (void)f.load_slice(t.name, dim, extent, 1); });
      }
    }
  });
  weft::fuzz::refused_ok([&] { (void)wt::load_for_inference(path, weft::DType::f32); });
  return 0;
}
