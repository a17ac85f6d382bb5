// The run settings as checkpoints keep them: which keys hold paths, how
// relative paths are resolved against a checkpoint directory, and the saved
// config read back for --resume and --init.
#include <algorithm>
#include <filesystem>
#include <functional>

#include "weft/io/checkpoint.h"
#include "weft/io/checkpoint_dir.h"
#include "weft/io/hf_export.h"
#include "weft/io/hf_files.h"
#include "weft/train/config.h"

namespace weft::train {

namespace fs = std::filesystem;

bool is_path_key(const std::string& key) {
  static const char* const kPaths[] = {"data", "save", "resume", "init", "metrics", "tokenizer"};
  const std::string k = canonical_key(key);
  return std::find(std::begin(kPaths), std::end(kPaths), k) != std::end(kPaths);
}

namespace {

// `settings` with fn applied to each non-empty relative path.
io::Json map_relative_paths(
    const io::Json& settings,
    const std::function<std::filesystem::path(const std::filesystem::path&)>& fn) {
  if (!settings.is_object()) return settings;
  io::Json out = settings;
  for (const auto& [name, value] : settings.as_object()) {
    if (!is_path_key(name) || !value.is_string() || value.as_string().empty()) continue;
    const std::filesystem::path p(value.as_string());
    if (p.is_absolute()) continue;
    std::filesystem::path mapped = fn(p).lexically_normal();
    if (mapped.has_parent_path() && mapped.filename().empty()) mapped = mapped.parent_path();
    out[name] = mapped.empty() ? std::string(".") : mapped.string();
  }
  return out;
}

}  // namespace

io::Json resolve_paths(const io::Json& settings, const std::string& base) {
  return map_relative_paths(
      settings, [&](const std::filesystem::path& p) { return std::filesystem::path(base) / p; });
}

io::Json relative_paths(const io::Json& settings, const std::string& base) {
  const std::filesystem::path from = std::filesystem::absolute(base).lexically_normal();
  return map_relative_paths(settings, [&](const std::filesystem::path& p) {
    return std::filesystem::absolute(p).lexically_normal().lexically_relative(from);
  });
}

io::Json shape_settings(const io::Json& settings) {
  static const char* const kShape[] = {"layers",
                                       "width",
                                       "heads",
                                       "seq",
                                       "vocab",
                                       "vocab-pad",
                                       "kv-heads",
                                       "hidden",
                                       "norm",
                                       "norm-eps",
                                       "mlp",
                                       "positions",
                                       "rope-theta",
                                       "bias",
                                       "tied-head",
                                       "moe-experts",
                                       "moe-top-k",
                                       "moe-every",
                                       "moe-capacity-factor",
                                       "moe-aux-coef",
                                       "moe-z-coef"};
  io::Json out = io::Json::object();
  if (!settings.is_object()) return out;
  for (const auto& [name, value] : settings.as_object()) {
    const std::string key = canonical_key(name);
    if (std::find(std::begin(kShape), std::end(kShape), key) != std::end(kShape)) out[key] = value;
  }
  return out;
}

io::Json read_checkpoint_config(const std::string& path) {
  const std::string dir_or_file = io::resolve_checkpoint(path);
  fs::path p(dir_or_file);
  if (fs::is_regular_file(p) && p.filename() == "index.json") p = p.parent_path();
  if (fs::is_directory(p) && !io::is_hf_directory(p.string())) {
    // Loading the weights says it when they carry no checksums; this reads none.
    io::CheckpointReader ck(p.string(), {.note_unverified = false});
    io::Json config = ck.index().at("config");
    if (!config.is_object()) config = io::Json::object();
    if (const io::Json* shape = ck.model_shape()) {
      // The model's size as saved wins over the settings (overwriting the
      // config's own spelling of a key, "vocab-pad", where it has one). Its
      // architecture only fills in what the settings lack (checkpoints of
      // runs before the architecture options): the settings spell it as the
      // options do ("kv-heads 0", "bias on"), the shape resolved.
      static const char* const kSize[] = {"vocab", "seq", "layers", "width", "heads", "vocab_pad"};
      for (const auto& [key, value] : shape->as_object()) {
        std::string dashed = key;
        std::replace(dashed.begin(), dashed.end(), '_', '-');
        const bool size = std::find(std::begin(kSize), std::end(kSize), key) != std::end(kSize);
        if (!size && (config.find(dashed) || config.find(key))) continue;
        config[config.find(dashed) ? dashed : key] = value;
      }
    }
    const io::Json* paths = config.find(kPathsKey);
    if (paths && *paths == io::Json(kPathsRelativeToCheckpoint))
      config = resolve_paths(config, p.string());
    return config;
  }
  WEFT_CHECK(fs::exists(p),
             "{} does not exist: give a checkpoint directory, a .safetensors file or a Hugging "
             "Face model directory",
             dir_or_file);
  return io::hf_config(dir_or_file);
}

}  // namespace weft::train
