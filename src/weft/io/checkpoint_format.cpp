#include "weft/io/checkpoint_format.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <tuple>

#include "weft/io/checksum.h"

namespace weft::io {

namespace fs = std::filesystem;

namespace {

std::string errno_text() { return std::strerror(errno); }

std::string read_text(const fs::path& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  WEFT_CHECK(in, "{}: cannot read {}: {}", what, path.string(), errno_text());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

constexpr const char* kUseAnother = "use another checkpoint (an earlier save, or a copy)";

// Indices [dst_start, dst_start + n) of dimension d of dst = indices
// [src_start, src_start + n) of src; both contiguous, of one dtype, equal in
// every other dimension.
void copy_along(const Tensor& dst, int d, int64_t dst_start, const Tensor& src, int64_t src_start,
                int64_t n) {
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < d; ++i) outer *= dst.size(i);
  for (int i = d + 1; i < dst.dim(); ++i) inner *= dst.size(i);
  const int64_t es = dtype_bits(dst.dtype()) / 8, dext = dst.size(d), sext = src.size(d);
  char* out = static_cast<char*>(dst.raw());
  const char* in = static_cast<const char*>(src.raw());
  for (int64_t o = 0; o < outer; ++o) {
    std::memcpy(out + (o * dext + dst_start) * inner * es, in + (o * sext + src_start) * inner * es,
                static_cast<size_t>(n * inner * es));
  }
}

// The key line that ends a sealed JSON file: "\n  \"xxh3\": \"<16 hex>\"\n}\n".
constexpr std::string_view kSealKey = "\n  \"xxh3\": \"";

parallel::RngTracker::State rng_from_json(const Json& j, const std::string& where) {
  parallel::RngTracker::State state;
  for (const auto& [name, s] : j.as_object()) {
    state[name] = {json_u64(s.at("seed"), where + " seed of stream " + name),
                   json_u64(s.at("offset"), where + " offset of stream " + name)};
  }
  return state;
}

}  // namespace

Json u64_json(uint64_t v) {
  return v <= static_cast<uint64_t>(INT64_MAX) ? Json(static_cast<int64_t>(v))
                                               : Json(std::to_string(v));
}

uint64_t json_u64(const Json& j, const std::string& what) {
  if (j.is_integer()) {
    WEFT_CHECK(j.as_int() >= 0, "{} must not be negative, got {}", what, j.as_int());
    return static_cast<uint64_t>(j.as_int());
  }
  WEFT_CHECK(j.is_string(), "{} must be an integer, got {}", what, j.dump());
  const std::string& s = j.as_string();
  WEFT_CHECK(!s.empty() && s.size() <= 20 && s.find_first_not_of("0123456789") == std::string::npos,
             "{} must be an integer, got \"{}\"", what, s);
  return std::stoull(s);
}

Json shape_json(const Shape& s) {
  Json out = Json::array();
  for (int d = 0; d < s.rank(); ++d) out.push_back(s[d]);
  return out;
}

Shape shape_from_json(const Json& j, const std::string& where) {
  const auto& dims = j.as_array();
  WEFT_CHECK(static_cast<int>(dims.size()) <= Shape::kMaxRank, "{}: shape {} has too many dims",
             where, j.dump());
  std::vector<int64_t> v;
  for (const Json& d : dims) {
    WEFT_CHECK(d.as_int() >= 0, "{}: shape {} has a negative dimension", where, j.dump());
    v.push_back(d.as_int());
  }
  return Shape(std::span<const int64_t>(v));
}

Json rng_json(const parallel::RngTracker::State& state) {
  Json out = Json::object();
  for (const auto& [name, s] : state) {
    Json stream = Json::object();
    stream["seed"] = u64_json(s.seed);
    stream["offset"] = u64_json(s.offset);
    out[name] = std::move(stream);
  }
  return out;
}

Json saved_tensor_json(const SavedTensor& t) {
  Json out = Json::object();
  out["dtype"] = t.dtype;
  out["shape"] = shape_json(t.global_shape);
  out["split_dim"] = t.split_dim;
  out["blocks"] = t.blocks;
  out["valid_rows"] = t.valid_rows;
  Json shards = Json::array();
  for (const SavedShard& s : t.shards) {
    Json j = Json::object();
    j["file"] = s.file;
    j["offset"] = s.offset;
    j["length"] = s.length;
    if (s.row_length >= 0) {
      j["row_offset"] = s.row_offset;
      j["row_length"] = s.row_length;
    }
    if (s.xxh3) j["xxh3"] = checksum_hex(*s.xxh3);
    if (s.nonfinite) j["nonfinite"] = s.nonfinite;
    shards.push_back(std::move(j));
  }
  out["shards"] = std::move(shards);
  return out;
}

std::string sealed_json_text(const Json& j) {
  WEFT_CHECK(j.is_object() && j.size() > 0 && !j.find("xxh3"),
             "sealed_json_text: needs a non-empty object without \"xxh3\"");
  std::string text = j.dump(2);  // "{\n  ...\n}"
  text.resize(text.size() - 2);
  text += ",\n";
  const uint64_t h = xxh3(text);
  return text + std::string(kSealKey.substr(1)) + checksum_hex(h) + "\"\n}\n";
}

Json parse_sealed_json(const std::string& text, const std::string& path, bool& sealed) {
  // The seal is the last member, alone on its line, as sealed_json_text writes
  // it; checked before parsing, so that damage reads as damage, not as a
  // syntax error.
  const size_t at = text.rfind(kSealKey);
  const size_t value = at == std::string::npos ? at : at + kSealKey.size();
  const bool has_seal = value != std::string::npos && text.size() == value + 16 + 4 &&
                        text.compare(value + 16, 4, "\"\n}\n") == 0;
  if (has_seal) {
    const std::string_view digits = std::string_view(text).substr(value, 16);
    const std::optional<uint64_t> saved = checksum_from_hex(digits);
    WEFT_CHECK(saved, "{} is damaged: its checksum \"{}\" is not 16 hex digits; {}", path, digits,
               kUseAnother);
    const uint64_t actual = xxh3(std::string_view(text).substr(0, at + 1));
    WEFT_CHECK(actual == *saved,
               "{} is damaged: its content has checksum {} but the file records {}; {}", path,
               checksum_hex(actual), checksum_hex(*saved), kUseAnother);
  }
  Json j = parse_json(text, path);
  sealed = j.is_object() && j.find("xxh3");
  WEFT_CHECK(sealed == has_seal && (!sealed || j.as_object().back().first == "xxh3"),
             "{} is damaged: its checksum is not on its last line as weft writes it; {}", path,
             kUseAnother);
  if (sealed) j.as_object().pop_back();
  return j;
}

int64_t count_nonfinite(const Tensor& t) {
  if (t.dtype() != DType::f32 && t.dtype() != DType::bf16 && t.dtype() != DType::f16) return 0;
  const Tensor f = t.dtype() == DType::f32 ? t : t.to(DType::f32);
  const float* v = f.data<float>();
  const auto n = static_cast<size_t>(f.numel());
  if (!any_nonfinite(v, n)) return 0;
  return static_cast<int64_t>(std::count_if(v, v + n, [](float x) { return !std::isfinite(x); }));
}

void check_finite(const Tensor& t, const std::string& what, const std::string& file) {
  if (t.dtype() != DType::f32 && t.dtype() != DType::bf16 && t.dtype() != DType::f16) return;
  const Tensor f = t.dtype() == DType::f32 ? t : t.to(DType::f32);
  const int64_t n = f.numel();
  const float* v = f.data<float>();
  if (!any_nonfinite(v, static_cast<size_t>(n))) return;
  int64_t first = -1, nans = 0, infs = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isfinite(v[i])) continue;
    if (first < 0) first = i;
    ++(std::isnan(v[i]) ? nans : infs);
  }
  WEFT_FAIL(
      "{}: {} holds {} NaN and {} infinite value{} of {} (the first at element {}): it was "
      "saved from a run that diverged; use an earlier checkpoint (weft eval "
      "--allow-nonfinite evaluates it anyway, for inspection)",
      file, what, nans, infs, infs == 1 ? "" : "s", n, first);
}

void check_tiling(SavedTensor& t, const std::string& where) {
  const int rank = t.global_shape.rank();
  WEFT_CHECK(t.split_dim >= -1 && t.split_dim < rank, "{}: tensor {} has split dimension {} of {}",
             where, t.name, t.split_dim, t.global_shape);
  const int64_t extent = t.split_dim >= 0 ? t.global_shape[t.split_dim] : 1;
  WEFT_CHECK(t.blocks >= 1 && extent % t.blocks == 0, "{}: tensor {} has {} blocks along {}", where,
             t.name, t.blocks, t.global_shape);
  // An unsplit tensor is one shard of its rows.
  const int64_t block =
      t.split_dim >= 0 ? extent / t.blocks : (rank ? t.global_shape[0] : int64_t{1});
  std::stable_sort(t.shards.begin(), t.shards.end(), [](const SavedShard& a, const SavedShard& b) {
    return std::tie(a.offset, a.row_offset) < std::tie(b.offset, b.row_offset);
  });
  const auto same_slice = [](const SavedShard& a, const SavedShard& b) {
    return a.offset == b.offset && a.length == b.length;
  };
  // Rows of the slice a shard belongs to (dimension 0 of the rank's part).
  const auto slice_rows = [&](const SavedShard& s) {
    return t.split_dim == 0 ? t.blocks * s.length : (rank ? t.global_shape[0] : int64_t{1});
  };
  std::vector<SavedShard> kept;
  int64_t next = 0, next_row = 0;
  const auto check_rows = [&] {
    const SavedShard& last = kept.back();
    WEFT_CHECK(next_row == slice_rows(last),
               "{}: the shards of tensor {} cover rows [0, {}) of the slice at {} of {} rows",
               where, t.name, next_row, last.offset, slice_rows(last));
  };
  for (const SavedShard& s : t.shards) {
    if (!kept.empty() && same_slice(s, kept.back()) && s.row_offset == kept.back().row_offset &&
        s.row_length == kept.back().row_length) {
      continue;
    }
    if (kept.empty() || !same_slice(s, kept.back())) {
      if (!kept.empty()) check_rows();
      WEFT_CHECK(s.offset == next && s.length > 0,
                 "{}: the shards of tensor {} do not tile it: {} starts at {}, expected {}", where,
                 t.name, s.file, s.offset, next);
      next += s.length;
      next_row = 0;
    }
    if (s.row_length < 0) {
      WEFT_CHECK(next_row == 0, "{}: tensor {} has a slice both whole and in rows ({})", where,
                 t.name, s.file);
      next_row = slice_rows(s);
    } else {
      WEFT_CHECK(rank >= 1 && s.row_offset == next_row && s.row_length > 0 &&
                     s.row_length <= slice_rows(s) - s.row_offset,
                 "{}: the row pieces of tensor {} do not tile its slice at {}: {} holds rows "
                 "[{}, +{}), expected them to start at {}",
                 where, t.name, s.offset, s.file, s.row_offset, s.row_length, next_row);
      next_row += s.row_length;
    }
    kept.push_back(s);
  }
  if (!kept.empty()) check_rows();
  WEFT_CHECK(next == block, "{}: the shards of tensor {} cover {} of {} along dimension {}", where,
             t.name, next, block, t.split_dim);
  t.shards = std::move(kept);
}

namespace {

void check_format(const Json& index, const std::string& where) {
  WEFT_CHECK(
      index.is_object() && index.find("format") && index.at("format") == Json(kCheckpointFormat),
      "{} is not a weft checkpoint index (no \"format\": \"{}\")", where, kCheckpointFormat);
  const int64_t version = index.at("format_version").as_int();
  WEFT_CHECK(version == kCheckpointFormatVersion,
             "{} has checkpoint format version {}; this weft reads version {} (use the weft that "
             "wrote it, or a newer one)",
             where, version, kCheckpointFormatVersion);
}

// The index's "files": plain names, so that none reaches outside the directory.
std::vector<std::string> plain_file_names(const Json& index, const std::string& where) {
  std::vector<std::string> files;
  for (const Json& f : index.at("files").as_array()) {
    const std::string& name = f.as_string();
    WEFT_CHECK(!name.empty() && name.find('/') == std::string::npos && name != "." && name != "..",
               "{}: file name \"{}\" is not a plain file name", where, name);
    files.push_back(name);
  }
  return files;
}

// What the tensor entries of one index are checked against.
struct IndexFacts {
  const std::string& where;
  bool sealed;
  const std::vector<std::string>& files;
};

SavedShard parse_shard(const Json& s, const std::string& name, const IndexFacts& index) {
  SavedShard shard{.file = s.at("file").as_string(),
                   .offset = s.at("offset").as_int(),
                   .length = s.at("length").as_int()};
  if (const Json* r = s.find("row_offset")) {
    shard.row_offset = r->as_int();
    shard.row_length = s.at("row_length").as_int();
  }
  if (const Json* h = s.find("xxh3")) {
    shard.xxh3 = checksum_from_hex(h->as_string());
    WEFT_CHECK(shard.xxh3, "{}: tensor {} has checksum \"{}\", not 16 hex digits", index.where,
               name, h->as_string());
  }
  if (const Json* n = s.find("nonfinite")) shard.nonfinite = n->as_int();
  // A checkpoint with checksums has them for every shard; one without
  // any (written before weft wrote them) has none: a member missing
  // from a sealed index is damage the seal did not catch.
  WEFT_CHECK(shard.xxh3.has_value() == index.sealed, "{} is damaged: {}; {}", index.where,
             index.sealed
                 ? format("tensor {} has no checksum, which every tensor of a "
                          "checkpoint with checksums has",
                          name)
                 : format("tensor {} has a checksum but the index has none of its own", name),
             kUseAnother);
  WEFT_CHECK(std::find(index.files.begin(), index.files.end(), shard.file) != index.files.end(),
             "{}: tensor {} names file {}, which the index does not list", index.where, name,
             shard.file);
  return shard;
}

void parse_section(const Json& section, const IndexFacts& index, std::vector<SavedTensor>& out) {
  for (const auto& [name, j] : section.as_object()) {
    SavedTensor t{.name = name,
                  .dtype = j.at("dtype").as_string(),
                  .global_shape = shape_from_json(j.at("shape"), index.where),
                  .split_dim = static_cast<int>(j.at("split_dim").as_int()),
                  .blocks = j.at("blocks").as_int(),
                  .valid_rows = j.at("valid_rows").as_int()};
    WEFT_CHECK(dtype_from_safetensors(t.dtype),
               "{}: tensor {} has dtype {}, which weft cannot load", index.where, name, t.dtype);
    for (const Json& s : j.at("shards").as_array()) t.shards.push_back(parse_shard(s, name, index));
    check_tiling(t, index.where);
    out.push_back(std::move(t));
  }
}

}  // namespace

CheckpointReader::CheckpointReader(std::string dir, ReadOptions options)
    : dir_(std::move(dir)), options_(options) {
  const fs::path d(dir_);
  WEFT_CHECK(!fs::is_regular_file(d),
             "{} is a file, not a checkpoint directory (a consolidated .safetensors file starts a "
             "run with `weft train --init FILE` or `weft checkpoint import FILE DIR`)",
             dir_);
  WEFT_CHECK(fs::is_directory(d), "checkpoint {} does not exist", dir_);
  WEFT_CHECK(fs::exists(d / "index.json"),
             "{} is not a weft checkpoint: it has no index.json (an interrupted save leaves its "
             "files in a DIR.tmp-* directory, never under DIR; use an earlier checkpoint)",
             dir_);
  const std::string where = (d / "index.json").string();
  index_ = parse_sealed_json(read_text(d / "index.json", "checkpoint " + dir_), where, sealed_);
  check_format(index_, where);
  const std::vector<std::string> files = plain_file_names(index_, where);
  const IndexFacts facts{where, sealed_, files};
  parse_section(index_.at("tensors"), facts, tensors_);
  if (has_optimizer())
    parse_section(index_.at("optimizer").at("tensors"), facts, optimizer_tensors_);
  json_u64(index_.at("data_seed"), where + " data_seed");
  for (const auto& [dim, size] : sizes()) {
    WEFT_CHECK(size >= 1, "{}: layout size of {} is {}", where, dim, size);
  }
  WEFT_CHECK(sealed_ || !index_.find("header_xxh3"),
             "{} is damaged: it records file checksums but has no checksum of its own; {}", where,
             kUseAnother);
  if (!sealed_ && options_.note_unverified) {
    std::cerr << "weft: note: checkpoint " << dir_
              << " carries no checksums (written by an earlier weft): it loads unverified\n";
  }
}

CheckpointReader::~CheckpointReader() = default;

int64_t CheckpointReader::step() const { return index_.at("step").as_int(); }
int CheckpointReader::world() const {
  return static_cast<int>(index_.at("layout").at("world").as_int());
}
std::string CheckpointReader::order() const { return index_.at("layout").at("order").as_string(); }

std::vector<std::pair<std::string, int>> CheckpointReader::sizes() const {
  std::vector<std::pair<std::string, int>> out;
  const std::string o = order();
  for (size_t start = 0, end; start <= o.size(); start = end + 1) {
    end = o.find('-', start);
    if (end == std::string::npos) end = o.size();
    const std::string dim = o.substr(start, end - start);
    out.emplace_back(dim, static_cast<int>(index_.at("layout").at(dim).as_int()));
  }
  return out;
}

bool CheckpointReader::has_optimizer() const {
  const Json* opt = index_.find("optimizer");
  return opt && !opt->is_null();
}

const SavedTensor* CheckpointReader::find(const std::string& name) const {
  for (const SavedTensor& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const SavedTensor* CheckpointReader::find_optimizer(const std::string& name) const {
  for (const SavedTensor& t : optimizer_tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const SafetensorsFile& CheckpointReader::file(const std::string& name) const {
  auto& slot = files_[name];
  if (slot) return *slot;
  auto f = std::make_unique<SafetensorsFile>((fs::path(dir_) / name).string());
  if (sealed_ && options_.verify) {
    const Json* saved = index_.at("header_xxh3").find(name);
    WEFT_CHECK(saved, "{}/index.json is damaged: it has no header checksum for {}; {}", dir_, name,
               kUseAnother);
    const std::optional<uint64_t> want = checksum_from_hex(saved->as_string());
    WEFT_CHECK(want && *want == f->header_xxh3(),
               "{} is damaged: its header has checksum {}, index.json records {}; {}", f->path(),
               checksum_hex(f->header_xxh3()), saved->as_string(), kUseAnother);
  }
  slot = std::move(f);
  return *slot;
}

Tensor CheckpointReader::read_shard(const SavedTensor& t, const SavedShard& s) const {
  const SafetensorsFile& f = file(s.file);
  const bool hash = s.xxh3 && options_.verify;
  const bool check = !options_.allow_nonfinite;
  // Bytes that match their checksum hold the non-finite values the writer
  // counted; others are scanned, f32 piece by piece as they come in.
  const bool f32 = f.info(t.name).weft_dtype == DType::f32;
  const bool scan = check && !hash && f32;
  Xxh3Stream sum;
  bool nonfinite = false;
  Tensor whole;
  if (hash || scan) {
    whole = f.load_in_pieces(t.name, [&](const void* data, size_t bytes) {
      if (hash) sum.update(data, bytes);
      if (scan) nonfinite |= any_nonfinite(static_cast<const float*>(data), bytes / 4);
    });
  } else {
    whole = f.load(t.name);
  }
  if (hash) {
    const uint64_t actual = sum.digest();
    WEFT_CHECK(actual == *s.xxh3,
               "{} is damaged: tensor {} has checksum {}, index.json records {}; {}", f.path(),
               t.name, checksum_hex(actual), checksum_hex(*s.xxh3), kUseAnother);
  }
  if (check && (hash ? s.nonfinite > 0 : nonfinite || !f32)) {
    const bool moment = t.name.ends_with(".exp_avg") || t.name.ends_with(".exp_avg_sq");
    check_finite(whole, format("{} {}", moment ? "optimizer moment" : "parameter", t.name),
                 f.path());
  }
  return whole;
}

Tensor CheckpointReader::read_slice(const SavedTensor& t, size_t begin, size_t end) const {
  const Shape& g = t.global_shape;
  Shape expect = g;
  if (t.split_dim >= 0) expect[t.split_dim] = t.blocks * t.shards[begin].length;
  const auto check_shape = [&](const SavedShard& s, const Shape& want) {
    const TensorInfo& info = file(s.file).info(t.name);
    WEFT_CHECK(info.dtype == t.dtype && Shape(std::span<const int64_t>(info.shape)) == want,
               "{} is corrupted: tensor {} is {} {}, the index says {} {}", file(s.file).path(),
               t.name, info.dtype, Shape(std::span<const int64_t>(info.shape)), t.dtype, want);
  };
  if (end - begin == 1 && t.shards[begin].row_length < 0) {
    check_shape(t.shards[begin], expect);
    return read_shard(t, t.shards[begin]);
  }
  Tensor slice = Tensor::empty(expect, *dtype_from_safetensors(t.dtype));
  for (size_t i = begin; i < end; ++i) {
    const SavedShard& s = t.shards[i];
    Shape rows = expect;
    rows[0] = s.row_length;
    check_shape(s, rows);
    slice.narrow(s.row_offset, s.row_length).copy_from(read_shard(t, s));
  }
  return slice;
}

Tensor CheckpointReader::read(const SavedTensor& t, const nn::ShardSpec& target) const {
  WEFT_CHECK(target.global_shape == t.global_shape, "checkpoint {}: {} has shape {}, not {}", dir_,
             t.name, t.global_shape, target.global_shape);
  // A row split (generalized tensor parallelism) takes its rows of the TP-level slice.
  if (target.rows_split()) return nn::row_shard_of(target, read(t, target.tp_level()));
  // A shared slice (replicated key/value heads) takes its blocks of the slice.
  if (target.is_shared()) return nn::held_part(target, read(t, target.shared_slice()));
  const Shape& g = t.global_shape;
  if (target.is_split() && t.split_dim >= 0 && target.split_dim != t.split_dim) {
    return nn::shard_of(target, read_full(t));
  }
  // Work along one dimension d: the target's split (or the saved one's).
  const int d = target.is_split() ? target.split_dim : std::max(t.split_dim, 0);
  const int64_t extent = g.rank() ? g[d] : 1;
  const int64_t tb = target.is_split() ? target.blocks : 1;
  const int64_t toff = target.is_split() ? target.offset : 0;
  const int64_t tlen = target.is_split() ? target.length : extent;
  const int64_t sb = t.split_dim >= 0 ? t.blocks : 1;
  const DType dtype = *dtype_from_safetensors(t.dtype);
  WEFT_CHECK(dtype_bits(dtype) % 8 == 0, "checkpoint {}: {} has a packed dtype", dir_, t.name);
  if (g.rank() == 0) return read_shard(t, t.shards.front()).to(DType::f32);
  Shape local = g;
  local[d] = tb * tlen;
  Tensor out = Tensor::empty(local, dtype);
  int64_t covered = 0;
  // The saved slices: runs of shards with one offset and length (a slice's
  // row pieces), as check_tiling sorted them.
  for (size_t begin = 0, end = 0; begin < t.shards.size(); begin = end) {
    const SavedShard& s = t.shards[begin];
    for (end = begin + 1; end < t.shards.size() && t.shards[end].offset == s.offset &&
                          t.shards[end].length == s.length;
         ++end) {
    }
    const int64_t len = t.split_dim >= 0 ? s.length : extent;
    // Read whole (every byte read is checked) when any part of it is needed.
    Tensor whole;
    for (int64_t b = 0; b < tb; ++b) {
      const int64_t lo_t = b * (extent / tb) + toff, hi_t = lo_t + tlen;
      for (int64_t b2 = 0; b2 < sb; ++b2) {
        const int64_t lo_s = b2 * (extent / sb) + (t.split_dim >= 0 ? s.offset : 0);
        const int64_t lo = std::max(lo_t, lo_s), hi = std::min(hi_t, lo_s + len);
        if (lo >= hi) continue;
        if (!whole.defined()) whole = read_slice(t, begin, end);
        copy_along(out, d, b * tlen + (lo - lo_t), whole, b2 * len + (lo - lo_s), hi - lo);
        covered += hi - lo;
      }
    }
  }
  WEFT_CHECK(covered == tb * tlen, "checkpoint {}: the shards of {} do not cover the slice", dir_,
             t.name);
  return out.to(DType::f32);
}

Tensor CheckpointReader::read_full(const SavedTensor& t) const {
  nn::ShardSpec whole;
  whole.global_shape = t.global_shape;
  return read(t, whole);
}

namespace {

Json read_rank_json(const std::string& dir, int rank, bool index_sealed) {
  const fs::path path = fs::path(dir) / format("rank{}.json", rank);
  bool sealed = false;
  Json j = parse_sealed_json(read_text(path, "checkpoint " + dir), path.string(), sealed);
  WEFT_CHECK(sealed || !index_sealed, "{} is damaged: it has no checksum, unlike its index; {}",
             path.string(), kUseAnother);
  WEFT_CHECK(j.is_object(), "{} is damaged: not a JSON object; {}", path.string(), kUseAnother);
  return j;
}

}  // namespace

parallel::RngTracker::State CheckpointReader::rank_rng(int rank) const {
  const Json j = read_rank_json(dir_, rank, sealed_);
  return rng_from_json(j.at("rng"), (fs::path(dir_) / format("rank{}.json", rank)).string());
}

Json CheckpointReader::rank_scaling(int rank) const {
  const Json j = read_rank_json(dir_, rank, sealed_);
  const Json* s = j.find("scaling");
  return s ? *s : Json();
}

}  // namespace weft::io
