#include "weft/io/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>

#include "weft/io/checkpoint_dir.h"
#include "weft/io/checkpoint_tokenizer.h"
#include "weft/io/checksum.h"
#include "weft/io/hf_export.h"
#include "weft/io/hf_files.h"

namespace weft::io {

namespace fs = std::filesystem;

namespace {

std::string errno_text() { return std::strerror(errno); }

// The ShardSpec fields a saved slice carries (safetensors metadata, one per
// tensor), the checksum of the bytes written for it (`local` without its row
// padding) and how many of its values are not finite.
Json slice_json(const nn::ShardSpec& spec, const Tensor& local) {
  Json out = Json::object();
  out["global_shape"] = shape_json(spec.global_shape);
  out["split_dim"] = spec.split_dim;
  out["blocks"] = spec.is_split() ? spec.blocks : int64_t{1};
  out["offset"] = spec.is_split() ? spec.offset : int64_t{0};
  out["length"] = spec.is_split() ? spec.length
                                  : (spec.global_shape.rank() ? spec.global_shape[0] : int64_t{1});
  out["valid_rows"] = spec.valid_rows;
  if (spec.rows_split()) {
    out["row_offset"] = spec.row_offset;
    out["row_length"] = spec.row_length;
  }
  out["xxh3"] = checksum_hex(xxh3(local.raw(), static_cast<size_t>(local.nbytes())));
  if (const int64_t n = count_nonfinite(local)) out["nonfinite"] = n;
  return out;
}

// Runs fn on every rank; when it fails on any rank, every rank throws: the
// rank's own error where it failed, else the lowest failing rank's message.
void agree(comm::ProcessGroup& world, const std::function<void()>& fn) {
  constexpr int64_t kBytes = 1024;
  std::exception_ptr failure;
  std::string message;
  try {
    fn();
  } catch (const Error& e) {
    failure = std::current_exception();
    message = e.what();
  } catch (const std::exception& e) {
    // Filesystem and allocation failures become weft::Errors (the CLI's exit status 2).
    message = e.what();
    failure = std::make_exception_ptr(Error(message));
  }
  if (failure && message.empty()) message = "unknown error";
  Tensor mine = Tensor::zeros({kBytes}, DType::u8);
  std::memcpy(mine.raw(), message.data(), std::min<size_t>(message.size(), kBytes - 1));
  Tensor all = Tensor::empty({kBytes * world.size()}, DType::u8);
  world.all_gather(all, mine).wait();
  if (failure) std::rethrow_exception(failure);
  const char* text = static_cast<const char*>(all.raw());
  for (int r = 0; r < world.size(); ++r) {
    const char* m = text + r * kBytes;
    if (*m) throw Error(format("{} (on rank {})", std::string(m, ::strnlen(m, kBytes)), r));
  }
}

void fsync_path(const fs::path& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  WEFT_CHECK(fd >= 0, "cannot open {}: {}", path.string(), errno_text());
  const int rc = ::fsync(fd);
  const std::string err = errno_text();
  ::close(fd);
  WEFT_CHECK(rc == 0, "cannot sync {}: {}", path.string(), err);
}

void write_text(const fs::path& path, const std::string& text) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    WEFT_CHECK(out, "cannot create {}: {}", path.string(), errno_text());
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
    WEFT_CHECK(out, "cannot write {}: {}", path.string(), errno_text());
  }
  fsync_path(path, false);
}

// DIR without a trailing separator (so DIR.tmp-* is its sibling).
fs::path clean_dir(const std::string& dir) {
  WEFT_CHECK(!dir.empty(), "the checkpoint directory name is empty");
  fs::path p = fs::path(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  WEFT_CHECK(!p.filename().empty() && p.filename() != "." && p.filename() != "..",
             "'{}' cannot be a checkpoint directory: name a directory, e.g. runs/ckpt", dir);
  return p;
}

// Rank 0, before any file is written: DIR must be absent, empty or a weft
// checkpoint; leftovers of interrupted saves go; the temporary directory is made.
void prepare(const fs::path& dir, const fs::path& tmp) {
  if (fs::exists(dir)) {
    WEFT_CHECK(fs::is_directory(dir), "cannot save a checkpoint to {}: it exists and is a file",
               dir.string());
    WEFT_CHECK(fs::exists(dir / "index.json") || fs::is_empty(dir),
               "refusing to replace {}: it exists and is not a weft checkpoint (no index.json); "
               "choose another directory",
               dir.string());
  }
  const fs::path parent = dir.has_parent_path() ? dir.parent_path() : fs::path(".");
  fs::create_directories(parent);
  const std::string stale_tmp = dir.filename().string() + ".tmp-";
  const std::string stale_old = dir.filename().string() + ".old-";
  for (const auto& e : fs::directory_iterator(parent)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with(stale_tmp) || name.starts_with(stale_old)) fs::remove_all(e.path());
  }
  WEFT_CHECK(::mkdir(tmp.c_str(), 0755) == 0, "cannot create {}: {}", tmp.string(), errno_text());
}

// Rank 0, after index.json: moves the complete temporary directory to DIR.
void commit(const fs::path& tmp, const fs::path& dir) {
  fsync_path(tmp, true);
  if (!fs::exists(dir)) {
    WEFT_CHECK(std::rename(tmp.c_str(), dir.c_str()) == 0, "cannot rename {} to {}: {}",
               tmp.string(), dir.string(), errno_text());
  } else if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) == 0) {
    fs::remove_all(tmp);  // now the previous checkpoint
  } else {
    // No atomic exchange on this filesystem: move the old one aside first.
    fs::path old = tmp;
    old.replace_filename(dir.filename().string() + ".old-" +
                         tmp.filename().string().substr(dir.filename().string().size() + 5));
    WEFT_CHECK(std::rename(dir.c_str(), old.c_str()) == 0, "cannot rename {} to {}: {}",
               dir.string(), old.string(), errno_text());
    WEFT_CHECK(std::rename(tmp.c_str(), dir.c_str()) == 0, "cannot rename {} to {}: {}",
               tmp.string(), dir.string(), errno_text());
    fs::remove_all(old);
  }
  fsync_path(dir.has_parent_path() ? dir.parent_path() : fs::path("."), true);
}

bool owns(const nn::ShardSpec& spec, const comm::Grid& grid) {
  for (const std::string& g : spec.replicated_over) {
    if (grid.layout().has(g) && grid.rank_in(g) != 0) return false;
  }
  return true;
}

// What this rank saves of `local` (p's value or one of its moments) and the
// spec it is saved at: its slice, from the host; or, for a shared slice
// (replicated key/value heads), the whole slice gathered from the ranks that
// share it (collective over p.share_group), saved by shared rank 0 only.
struct SavedSlice {
  Tensor data;
  nn::ShardSpec spec;
  bool save = true;
};

SavedSlice saved_slice(const nn::Parameter& p, const Tensor& local) {
  if (!p.spec.is_shared()) return {nn::unpadded(p.spec, local).to(Device::cpu()), p.spec, true};
  WEFT_CHECK(p.share_group && p.share_group->size() == p.spec.shared,
             "cannot save {}: its slice is shared by {} ranks, but it has no group of them", p.name,
             p.spec.shared);
  Shape all = local.shape();
  all[0] *= p.spec.shared;
  Tensor gathered = Tensor::empty(all, local.dtype(), local.device());
  p.share_group->all_gather(gathered, local).wait();
  return {nn::joined_slice(p.spec, gathered).to(Device::cpu()), p.spec.shared_slice(),
          p.spec.shared_rank == 0};
}

std::string file_name(const char* kind, int rank) {
  return format("{}-rank{}.safetensors", kind, rank);
}

// This rank's model and optimizer files and rank<R>.json.
void write_rank_files(const fs::path& tmp, int rank, const comm::Grid& grid, nn::Module& model,
                      optim::AdamW* optimizer, const TrainState& state) {
  std::vector<NamedTensor> params, moments;
  std::map<std::string, std::string> pmeta, mmeta;
  for (auto* meta : {&pmeta, &mmeta}) {
    (*meta)["format"] = kCheckpointFormat;
    (*meta)["format_version"] = std::to_string(kCheckpointFormatVersion);
    (*meta)["rank"] = std::to_string(rank);
  }
  // A rank whose rows of a row-split parameter are all padding writes none.
  const auto writes = [&](const nn::ShardSpec& spec) {
    return owns(spec, grid) && (!spec.rows_split() || spec.row_length > 0);
  };
  // Every tensor is gathered (shared slices) before any file is written.
  for (nn::Parameter* p : model.parameters()) {
    if (!writes(p->spec)) continue;
    // Written from the host: a model on a GPU is copied out first.
    const SavedSlice s = saved_slice(*p, p->value);
    if (!s.save) continue;
    params.push_back({p->name, s.data});
    pmeta[p->name] = slice_json(s.spec, s.data).dump();
  }
  if (optimizer) {
    const auto& ps = optimizer->parameters();
    for (size_t i = 0; i < ps.size(); ++i) {
      if (!writes(ps[i]->spec)) continue;
      for (const auto& [suffix, t] : {std::pair{".exp_avg", optimizer->first_moments()[i]},
                                      std::pair{".exp_avg_sq", optimizer->second_moments()[i]}}) {
        const SavedSlice s = saved_slice(*ps[i], t);
        if (!s.save) continue;
        moments.push_back({ps[i]->name + suffix, s.data});
        mmeta[ps[i]->name + suffix] = slice_json(s.spec, s.data).dump();
      }
    }
  }
  if (!params.empty()) write_safetensors((tmp / file_name("model", rank)).string(), params, pmeta);
  if (!moments.empty()) {
    write_safetensors((tmp / file_name("optimizer", rank)).string(), moments, mmeta);
  }
  Json info = Json::object();
  info["rank"] = rank;
  Json coords = Json::object();
  for (const std::string& dim : grid.layout().names()) coords[dim] = grid.rank_in(dim);
  info["coords"] = std::move(coords);
  info["rng"] = rng_json(state.rng);
  if (!state.scaling.is_null()) info["scaling"] = state.scaling;
  write_text(tmp / format("rank{}.json", rank), sealed_json_text(info));
}

// Rank 0, after every rank wrote its files: the index, from the files' own metadata.
Json build_index(const fs::path& tmp, const comm::ProcessGroup& world, const comm::Grid& grid,
                 nn::Module& model, optim::AdamW* optimizer, const TrainState& state) {
  Json index = Json::object();
  index["format"] = kCheckpointFormat;
  index["format_version"] = kCheckpointFormatVersion;
  index["step"] = state.step;
  index["data_seed"] = u64_json(state.data_seed);
  Json layout = Json::object();
  layout["world"] = world.size();
  layout["order"] = grid.layout().order();
  for (const std::string& dim : grid.layout().names()) layout[dim] = grid.size(dim);
  auto* gpt = dynamic_cast<nn::Gpt*>(&model);
  if (gpt) layout["sp"] = nn::sequence_parallel_name(gpt->context()->sp);
  index["layout"] = std::move(layout);
  if (gpt) index["model"] = model_shape_json(gpt->config());
  index["config"] = state.config;
  if (!state.tokenizer.empty()) index["tokenizer"] = tokenizer_index_entry(state.tokenizer);

  Json files = Json::array();
  Json headers = Json::object();
  std::vector<SavedTensor> sections[2];
  const char* kinds[2] = {"model", "optimizer"};
  for (int k = 0; k < 2; ++k) {
    std::map<std::string, size_t> where;
    for (int r = 0; r < world.size(); ++r) {
      const std::string name = file_name(kinds[k], r);
      if (!fs::exists(tmp / name)) continue;
      files.push_back(name);
      SafetensorsFile f((tmp / name).string());
      headers[name] = checksum_hex(f.header_xxh3());
      for (const TensorInfo& ti : f.tensors()) {
        const Json m = parse_json(f.metadata().at(ti.name), name + " metadata");
        auto [it, fresh] = where.emplace(ti.name, sections[k].size());
        if (fresh) {
          sections[k].push_back({.name = ti.name,
                                 .dtype = ti.dtype,
                                 .global_shape = shape_from_json(m.at("global_shape"), name),
                                 .split_dim = static_cast<int>(m.at("split_dim").as_int()),
                                 .blocks = m.at("blocks").as_int(),
                                 .valid_rows = m.at("valid_rows").as_int()});
        }
        sections[k][it->second].shards.push_back(
            {.file = name,
             .offset = m.at("offset").as_int(),
             .length = m.at("length").as_int(),
             .row_offset = m.find("row_offset") ? m.at("row_offset").as_int() : 0,
             .row_length = m.find("row_length") ? m.at("row_length").as_int() : -1,
             .xxh3 = checksum_from_hex(m.at("xxh3").as_string()),
             .nonfinite = m.find("nonfinite") ? m.at("nonfinite").as_int() : 0});
      }
    }
    for (SavedTensor& t : sections[k]) check_tiling(t, "saving " + tmp.string());
  }
  for (int r = 0; r < world.size(); ++r) files.push_back(format("rank{}.json", r));
  index["files"] = std::move(files);
  index["header_xxh3"] = std::move(headers);
  Json tensors = Json::object();
  for (const SavedTensor& t : sections[0]) tensors[t.name] = saved_tensor_json(t);
  index["tensors"] = std::move(tensors);
  if (optimizer) {
    Json opt = Json::object();
    opt["type"] = "adamw";
    opt["steps"] = optimizer->steps_taken();
    Json moments = Json::object();
    for (const SavedTensor& t : sections[1]) moments[t.name] = saved_tensor_json(t);
    opt["tensors"] = std::move(moments);
    index["optimizer"] = std::move(opt);
  }
  return index;
}

std::string flag_name(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return key;
}

// With `shorter_context`, a model whose context is shorter than the saved
// one's passes (it keeps the first positions of wpe).
void check_model(const CheckpointReader& ck, nn::Module& model, bool shorter_context) {
  auto* gpt = dynamic_cast<nn::Gpt*>(&model);
  if (gpt && ck.model_shape()) {
    const Json shape = model_shape_json(gpt->config());
    for (const auto& [key, mine] : shape.as_object()) {
      const Json* saved = ck.model_shape()->find(key);
      if (shorter_context && key == "seq" && saved && saved->is_integer() &&
          saved->as_int() > mine.as_int()) {
        continue;
      }
      WEFT_CHECK(!saved || *saved == mine,
                 "checkpoint {} holds a model with {} {}, but this model has {} {}: build the "
                 "model with the checkpoint's shape (--{} {})",
                 ck.dir(), key, saved->dump(), key, mine.dump(), flag_name(key), saved->dump());
    }
  }
  std::map<std::string, nn::Parameter*> mine;
  for (nn::Parameter* p : model.parameters()) mine[p->name] = p;
  // Expert parallelism: the other ranks' experts.
  const std::vector<std::string> others = model.parameters_elsewhere();
  for (const SavedTensor& t : ck.tensors()) {
    WEFT_CHECK(
        mine.count(t.name) || std::find(others.begin(), others.end(), t.name) != others.end(),
        "checkpoint {} holds parameter {}, which this model lacks", ck.dir(), t.name);
  }
  for (const auto& [name, p] : mine) {
    const SavedTensor* t = ck.find(name);
    WEFT_CHECK(t, "checkpoint {} has no parameter {}: it is of another model", ck.dir(), name);
    const bool fewer_positions = shorter_context && name == "wpe.weight" &&
                                 t->global_shape.rank() == 2 &&
                                 t->global_shape[1] == p->spec.global_shape[1] &&
                                 t->global_shape[0] > p->spec.global_shape[0];
    WEFT_CHECK(t->global_shape == p->spec.global_shape || fewer_positions,
               "checkpoint {} holds {} of shape {}, but this model's is {}: it is of another model",
               ck.dir(), name, t->global_shape, p->spec.global_shape);
  }
}

bool same_layout(const CheckpointReader& ck, const comm::ProcessGroup& world,
                 const comm::Grid& grid) {
  std::vector<std::pair<std::string, int>> mine;
  for (const std::string& dim : grid.layout().names()) mine.emplace_back(dim, grid.size(dim));
  return ck.world() == world.size() && ck.order() == grid.layout().order() && ck.sizes() == mine;
}

std::string layout_text(int world, const std::vector<std::pair<std::string, int>>& sizes) {
  std::string s = format("world {} (", world);
  for (size_t i = 0; i < sizes.size(); ++i) {
    s += format("{}{} {}", i ? ", " : "", sizes[i].first, sizes[i].second);
  }
  return s + ")";
}

// Says so (rank 0) when the streams are re-seeded.
parallel::RngTracker::State restored_rng(const CheckpointReader& ck,
                                         const comm::ProcessGroup& world, const comm::Grid& grid) {
  if (same_layout(ck, world, grid)) return ck.rank_rng(world.rank());
  parallel::RngTracker::State state = ck.rank_rng(0);
  auto def = state.find(parallel::kDefaultStream);
  auto mp = state.find(parallel::kModelParallelStream);
  if (def != state.end() && mp != state.end()) {
    // The largest offset any rank reached: no new stream replays old numbers.
    uint64_t offset = 0;
    for (int r = 0; r < ck.world(); ++r) {
      const auto s = ck.rank_rng(r);
      if (auto it = s.find(parallel::kModelParallelStream); it != s.end()) {
        offset = std::max(offset, it->second.offset);
      }
    }
    const int tp_rank = grid.layout().has("tp") ? grid.rank_in("tp") : 0;
    mp->second = {
        def->second.seed + parallel::kModelParallelSeedOffset + static_cast<uint64_t>(tp_rank),
        offset};
  }
  if (world.rank() == 0 && def != state.end()) {
    std::vector<std::pair<std::string, int>> now;
    for (const std::string& dim : grid.layout().names()) now.emplace_back(dim, grid.size(dim));
    std::cerr << "weft: checkpoint " << ck.dir() << " was saved at "
              << layout_text(ck.world(), ck.sizes()) << ", loading at "
              << layout_text(world.size(), now) << ": random streams re-seeded from seed "
              << def->second.seed << " (default stream at offset " << def->second.offset << ")\n";
  }
  return state;
}

}  // namespace

namespace {

// The architecture keys of model_shape_json (or their dashed spellings);
// absent keys leave cfg's values.
nn::GptConfig apply_architecture(nn::GptConfig cfg, const Json& shape) {
  const auto find = [&](const std::string& key) {
    const Json* v = shape.find(key);
    return v ? v : shape.find(flag_name(key));
  };
  for (auto [key, field] :
       {std::pair{"kv_heads", &cfg.kv_heads}, std::pair{"hidden", &cfg.hidden},
        std::pair{"moe_experts", &cfg.moe_experts}, std::pair{"moe_top_k", &cfg.moe_top_k},
        std::pair{"moe_every", &cfg.moe_every}}) {
    if (const Json* v = find(key)) *field = v->as_int();
  }
  if (const Json* v = find("norm")) {
    WEFT_CHECK(v->is_string() && (v->as_string() == "layernorm" || v->as_string() == "rmsnorm"),
               "model norm must be layernorm or rmsnorm, got {}", v->dump());
    cfg.norm = v->as_string() == "rmsnorm" ? nn::NormKind::rms : nn::NormKind::layer;
  }
  if (const Json* v = find("norm_eps")) cfg.norm_eps = static_cast<float>(v->as_double());
  if (const Json* v = find("mlp")) cfg.mlp = nn::parse_mlp_kind(v->as_string());
  if (const Json* v = find("positions")) cfg.positions = nn::parse_position_kind(v->as_string());
  if (const Json* v = find("rope_theta")) cfg.rope_theta = v->as_double();
  if (const Json* v = find("bias")) cfg.bias = v->as_bool();
  if (const Json* v = find("tied_head")) cfg.tied_head = v->as_bool();
  for (auto [key, field] :
       {std::pair{"moe_capacity_factor", &cfg.moe_capacity_factor},
        std::pair{"moe_aux_coef", &cfg.moe_aux_coef}, std::pair{"moe_z_coef", &cfg.moe_z_coef}}) {
    if (const Json* v = find(key)) *field = static_cast<float>(v->as_double());
  }
  return cfg;
}

}  // namespace

Json model_shape_json(const nn::GptConfig& cfg) {
  Json out = Json::object();
  out["vocab"] = cfg.vocab;
  out["seq"] = cfg.seq;
  out["layers"] = cfg.layers;
  out["width"] = cfg.width;
  out["heads"] = cfg.heads;
  out["vocab_pad"] = cfg.vocab_pad;
  // The architecture (checkpoints without these keys hold GPT-2 models).
  out["kv_heads"] = cfg.kv_head_count();
  out["hidden"] = cfg.mlp_hidden();
  out["norm"] = cfg.norm == nn::NormKind::rms ? "rmsnorm" : "layernorm";
  out["norm_eps"] = static_cast<double>(cfg.norm_eps);
  out["mlp"] = nn::mlp_kind_name(cfg.mlp);
  out["positions"] = nn::position_kind_name(cfg.positions);
  out["rope_theta"] = cfg.rope_theta;
  out["bias"] = cfg.bias;
  out["tied_head"] = cfg.tied_head;
  // Mixture of experts: only MoE models carry these (absent: dense).
  if (cfg.moe_experts > 0) {
    out["moe_experts"] = cfg.moe_experts;
    out["moe_top_k"] = cfg.moe_top_k;
    out["moe_every"] = cfg.moe_every;
    out["moe_capacity_factor"] = static_cast<double>(cfg.moe_capacity_factor);
    out["moe_aux_coef"] = static_cast<double>(cfg.moe_aux_coef);
    out["moe_z_coef"] = static_cast<double>(cfg.moe_z_coef);
  }
  return out;
}

nn::GptConfig apply_model_shape(nn::GptConfig cfg, const Json& shape) {
  for (auto [key, field] :
       {std::pair{"vocab", &cfg.vocab}, std::pair{"seq", &cfg.seq},
        std::pair{"layers", &cfg.layers}, std::pair{"width", &cfg.width},
        std::pair{"heads", &cfg.heads}, std::pair{"vocab_pad", &cfg.vocab_pad}}) {
    const Json* v = shape.find(key);
    if (!v) v = shape.find(flag_name(key));
    if (v) *field = v->as_int();
  }
  return apply_architecture(std::move(cfg), shape);
}

void save_checkpoint(const std::string& dir, comm::ProcessGroup& world, const comm::Grid& grid,
                     nn::Module& model, optim::AdamW* optimizer, const TrainState& state) {
  const fs::path final_dir = clean_dir(dir);
  const bool root = world.rank() == 0;
  // One temporary name for all ranks: rank 0's nonce.
  Tensor nonce = Tensor::zeros({2}, DType::i32);
  if (root) {
    std::random_device rd;
    nonce.data<int32_t>()[0] = static_cast<int32_t>(::getpid());
    nonce.data<int32_t>()[1] = static_cast<int32_t>(rd() & 0x7fffffff);
  }
  world.broadcast(nonce, 0).wait();
  fs::path tmp = final_dir;
  tmp.replace_filename(format("{}.tmp-{}-{}", final_dir.filename().string(),
                              nonce.data<int32_t>()[0], nonce.data<int32_t>()[1]));
  agree(world, [&] {
    if (root) prepare(final_dir, tmp);
  });
  try {
    agree(world, [&] { write_rank_files(tmp, world.rank(), grid, model, optimizer, state); });
    agree(world, [&] {
      if (!root) return;
      if (!state.tokenizer.empty()) write_text(tmp / kTokenizerFile, state.tokenizer);
      write_text(tmp / "index.json",
                 sealed_json_text(build_index(tmp, world, grid, model, optimizer, state)));
      commit(tmp, final_dir);
    });
  } catch (...) {
    if (root) {
      std::error_code ignored;
      fs::remove_all(tmp, ignored);
    }
    throw;
  }
}

TrainState load_checkpoint(const std::string& dir, comm::ProcessGroup& world,
                           const comm::Grid& grid, nn::Module& model, optim::AdamW* optimizer,
                           ReadOptions options) {
  TrainState state;
  options.note_unverified = options.note_unverified && world.rank() == 0;
  agree(world, [&] {
    CheckpointReader ck(dir, options);
    // Weights alone (--init, eval) may go into a model with a shorter context.
    check_model(ck, model, optimizer == nullptr);
    for (nn::Parameter* p : model.parameters()) {
      const SavedTensor& t = *ck.find(p->name);
      ++p->version;                                  // weight sources recast it
      if (t.global_shape != p->spec.global_shape) {  // wpe of a longer context
        p->value.copy_from(
            nn::shard_of(p->spec, ck.read_full(t).narrow(0, p->spec.global_shape[0])));
        continue;
      }
      p->value.copy_from(ck.read(t, p->spec));
    }
    if (optimizer) {
      const auto& ps = optimizer->parameters();
      if (!ck.has_optimizer()) {
        for (size_t i = 0; i < ps.size(); ++i) {
          optimizer->first_moments()[i].zero();
          optimizer->second_moments()[i].zero();
        }
        optimizer->set_steps_taken(0);
        if (world.rank() == 0) {
          std::cerr << "weft: checkpoint " << dir
                    << " holds no optimizer state: the optimizer starts afresh\n";
        }
      } else {
        for (size_t i = 0; i < ps.size(); ++i) {
          for (auto [suffix, moments] : {std::pair{".exp_avg", &optimizer->first_moments()},
                                         std::pair{".exp_avg_sq", &optimizer->second_moments()}}) {
            const SavedTensor* t = ck.find_optimizer(ps[i]->name + suffix);
            WEFT_CHECK(t, "checkpoint {} has no optimizer state {}{}", dir, ps[i]->name, suffix);
            (*moments)[i].copy_from(ck.read(*t, ps[i]->spec));
          }
        }
        optimizer->set_steps_taken(ck.index().at("optimizer").at("steps").as_int());
      }
    }
    state.step = ck.step();
    state.data_seed = json_u64(ck.index().at("data_seed"), dir + " data_seed");
    state.config = ck.index().at("config");
    // Evaluation and generation (no optimizer) never draw from the streams.
    if (optimizer) {
      state.rng = restored_rng(ck, world, grid);
      state.scaling = ck.rank_scaling(same_layout(ck, world, grid) ? world.rank() : 0);
    }
  });
  return state;
}

}  // namespace weft::io
