// `weft checkpoint verify`: every file of a checkpoint checked against its
// checksums, without loading a model.
#pragma once

#include <string>
#include <vector>

namespace weft::io {

struct FileVerdict {
  std::string file;  // relative to the checkpoint directory (or the path given)
  bool ok = false;
  std::string detail;  // what was checked, or what is wrong
};

// For a checkpoint directory: index.json (its own checksum and its
// structure), then every file it lists, in its order: a .safetensors file's
// header checksum and every tensor's bytes against the index's checksums
// (and that every value is finite), a rank<R>.json's own checksum. A
// checkpoint written before checksums existed is checked for structure only.
// For a Hugging Face .safetensors file, or a directory holding
// model.safetensors (and config.json): the structure only — the format has
// no checksums. Problems are verdicts, not errors; an error only when `path`
// is none of these.
std::vector<FileVerdict> verify_checkpoint(const std::string& path);

}  // namespace weft::io
