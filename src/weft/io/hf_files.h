// Hugging Face model files as `save_pretrained` reads and writes them.
//
// A model is given as one .safetensors file, or as a directory holding
// config.json and either model.safetensors or model.safetensors.index.json
// with the shards it names:
//   {"metadata": {"total_size": BYTES},
//    "weight_map": {"transformer.wte.weight": "model-00001-of-00002.safetensors", ...}}
// Every file is untrusted: a shard name must be a plain file name inside the
// directory, every tensor of the map must be in the shard the map names, and
// no tensor may appear twice.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/io/json.h"
#include "weft/io/safetensors.h"

namespace weft::io {

// Whether `dir` is a Hugging Face model directory (model.safetensors or
// model.safetensors.index.json in it, and no weft checkpoint index.json).
bool is_hf_directory(const std::string& dir);

class HfModelFiles {
 public:
  // A .safetensors file or a Hugging Face model directory; a clear error
  // for anything else.
  explicit HfModelFiles(const std::string& path);

  const std::string& path() const { return path_; }
  // The safetensors files, in index order (one for an unsharded model).
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }
  // Every tensor of every file.
  std::vector<const TensorInfo*> tensors() const;
  const TensorInfo* find(std::string_view name) const;
  // find() or an error naming the model.
  const TensorInfo& info(std::string_view name) const;
  // The tensor, read from its file; an error naming the model when absent.
  Tensor load(std::string_view name) const;
  // The first file's metadata (a sharded save repeats it in every shard).
  const std::map<std::string, std::string>& metadata() const;
  // config.json of the model: in the directory, or next to a lone file
  // ("" when there is none).
  const std::string& config_path() const { return config_path_; }

 private:
  const SafetensorsFile* file_of(std::string_view name) const;

  std::string path_, config_path_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, size_t, std::less<>> where_;  // tensor -> index in files_
};

struct HfDirectoryOptions {
  // A shard holds at most this many bytes of tensor data (a tensor larger
  // than that gets a shard of its own), as save_pretrained's max_shard_size.
  int64_t max_shard_bytes = int64_t{5} << 30;
};

// Writes a model directory as save_pretrained does: `dir` (created if
// missing) gets model.safetensors — or, above max_shard_bytes, shards
// model-0000i-of-0000n.safetensors and model.safetensors.index.json — and
// the JSON `files` (name -> content, e.g. config.json). Each file is written
// to a temporary name and renamed; shards of an earlier save there that the
// new index does not name are removed, and files not written here are left
// alone. Returns the names of the files written.
std::vector<std::string> write_hf_directory(const std::string& dir,
                                            std::span<const NamedTensor> tensors,
                                            const std::map<std::string, std::string>& metadata,
                                            const std::map<std::string, Json>& files,
                                            const HfDirectoryOptions& options = {});

// The tokenizer files (tokenizer.json, tokenizer_config.json) of weft's
// byte-level tokenizer as a Hugging Face fast tokenizer: a byte-level BPE
// with the 256 bytes as its vocabulary (id = byte, spelled in GPT-2's
// byte-to-unicode alphabet) and no merges, so AutoTokenizer encodes text to
// the same ids as weft. `model_max_length` is the model's context.
std::map<std::string, Json> byte_tokenizer_files(int64_t model_max_length);

}  // namespace weft::io
