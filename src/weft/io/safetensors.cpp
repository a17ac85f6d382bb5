#include "weft/io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

#include "weft/io/checksum.h"
#include "weft/io/json.h"

namespace weft::io {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; weft reads and writes it as stored");

namespace {

// The format's cap on header size (the reference implementation's limit).
constexpr int64_t kMaxHeaderBytes = 100'000'000;

struct DtypeEntry {
  std::string_view name;
  int bits;
  std::optional<DType> weft;
};

constexpr DtypeEntry kDtypes[] = {
    {"F32", 32, DType::f32},
    {"BF16", 16, DType::bf16},
    {"F16", 16, DType::f16},
    {"F8_E4M3", 8, DType::e4m3},
    {"F8_E5M2", 8, DType::e5m2},
    {"F8_E8M0", 8, DType::e8m0},
    {"F4", 4, DType::e2m1},
    {"I32", 32, DType::i32},
    {"U8", 8, DType::u8},
    {"BOOL", 8, std::nullopt},
    {"I8", 8, std::nullopt},
    {"I16", 16, std::nullopt},
    {"U16", 16, std::nullopt},
    {"U32", 32, std::nullopt},
    {"I64", 64, std::nullopt},
    {"U64", 64, std::nullopt},
    {"F64", 64, std::nullopt},
    {"C64", 64, std::nullopt},
    {"F6_E2M3", 6, std::nullopt},
    {"F6_E3M2", 6, std::nullopt},
    {"F8_E4M3FNUZ", 8, std::nullopt},
    {"F8_E5M2FNUZ", 8, std::nullopt},
};

const DtypeEntry* find_dtype(std::string_view name) {
  for (const DtypeEntry& e : kDtypes) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

std::string errno_text() { return std::strerror(errno); }

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Removes the temporary file unless commit() renamed it into place.
class TempFile {
 public:
  TempFile(std::string final_path) : final_(std::move(final_path)), temp_(final_ + ".tmp") {
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("creating " + temp_);
  }
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(temp_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void write(const void* data, int64_t bytes, std::string_view what) {
    const char* p = static_cast<const char*>(data);
    while (bytes > 0) {
      ssize_t n = ::write(fd_, p, static_cast<size_t>(std::min<int64_t>(bytes, 1 << 30)));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (n == 0) errno = ENOSPC;
        fail(format("writing {}", what));
      }
      p += n;
      bytes -= n;
    }
  }

  void commit() {
    if (::fsync(fd_) != 0) fail("flushing " + temp_ + " to disk");
    int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) fail("closing " + temp_);
    if (::rename(temp_.c_str(), final_.c_str()) != 0) fail("renaming " + temp_);
    committed_ = true;
    // Make the rename itself durable; the file is complete whatever happens here.
    size_t slash = final_.rfind('/');
    std::string dir = slash == std::string::npos ? "." : final_.substr(0, slash + 1);
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
  }

 private:
  [[noreturn]] void fail(const std::string& step) const {
    WEFT_FAIL(
        "cannot write {}: {} failed: {}; nothing was written under that name (check that the "
        "directory exists, is writable and has free space)",
        final_, step, errno_text());
  }

  std::string final_;
  std::string temp_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace

std::string_view safetensors_dtype_name(DType t) {
  for (const DtypeEntry& e : kDtypes) {
    if (e.weft == t) return e.name;
  }
  WEFT_FAIL("dtype {} has no safetensors name", dtype_name(t));
}

std::optional<DType> dtype_from_safetensors(std::string_view name) {
  const DtypeEntry* e = find_dtype(name);
  return e ? e->weft : std::nullopt;
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void write_safetensors(const std::string& path, std::span<const NamedTensor> tensors,
                       const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  Json::Object& members = header.as_object();
  if (!metadata.empty()) {
    Json m = Json::object();
    for (const auto& [k, v] : metadata) m.as_object().emplace_back(k, Json(v));
    members.emplace_back("__metadata__", std::move(m));
  }
  std::set<std::string_view> names;
  int64_t offset = 0;
  for (const NamedTensor& nt : tensors) {
    const Tensor& t = nt.tensor;
    WEFT_CHECK(!nt.name.empty() && nt.name != "__metadata__",
               "cannot write {}: a tensor may not be named \"{}\"", path, nt.name);
    WEFT_CHECK(names.insert(nt.name).second, "cannot write {}: two tensors are named \"{}\"", path,
               nt.name);
    WEFT_CHECK(t.defined(), "cannot write {}: tensor \"{}\" is undefined", path, nt.name);
    WEFT_CHECK(t.device().is_cpu(), "cannot write {}: tensor \"{}\" is on {}; copy it to the CPU",
               path, nt.name, t.device());
    WEFT_CHECK(t.numel() * dtype_bits(t.dtype()) % 8 == 0,
               "cannot write {}: tensor \"{}\" ({} {}) does not fill whole bytes", path, nt.name,
               dtype_name(t.dtype()), t.shape());
    Json shape = Json::array();
    for (int d = 0; d < t.dim(); ++d) shape.push_back(t.size(d));
    Json entry = Json::object();
    entry["dtype"] = safetensors_dtype_name(t.dtype());
    entry["shape"] = std::move(shape);
    entry["data_offsets"] = Json(Json::Array{Json(offset), Json(offset + t.nbytes())});
    members.emplace_back(nt.name, std::move(entry));
    offset += t.nbytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  uint64_t n = text.size();

  TempFile file(path);
  file.write(&n, 8, "the header length");
  file.write(text.data(), static_cast<int64_t>(text.size()), "the header");
  for (const NamedTensor& nt : tensors) {
    file.write(nt.tensor.raw(), nt.tensor.nbytes(), "tensor \"" + nt.name + "\"");
  }
  file.commit();
}

// ---- reading ----

SafetensorsFile::SafetensorsFile(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  WEFT_CHECK(fd_ >= 0, "cannot open {}: {}", path_, errno_text());
  try {
    struct stat st {};
    WEFT_CHECK(::fstat(fd_, &st) == 0, "cannot read {}: {}", path_, errno_text());
    WEFT_CHECK(S_ISREG(st.st_mode), "{} is not a regular file", path_);
    const int64_t size = st.st_size;
    WEFT_CHECK(size >= 8,
               "{} is not a safetensors file: it has {} bytes, fewer than the 8-byte header length",
               path_, size);
    uint64_t n = 0;
    read_at(&n, 8, 0, {});
    WEFT_CHECK(n <= static_cast<uint64_t>(kMaxHeaderBytes),
               "{} is corrupted or not a safetensors file: its header length {} exceeds the "
               "format's limit of {} bytes",
               path_, n, kMaxHeaderBytes);
    WEFT_CHECK(static_cast<int64_t>(n) <= size - 8,
               "{} is truncated or corrupted: its header length is {} bytes but only {} bytes "
               "follow the length field",
               path_, n, size - 8);
    data_start_ = 8 + static_cast<int64_t>(n);
    std::string header(n, '\0');
    read_at(header.data(), static_cast<int64_t>(n), 8, {});
    WEFT_CHECK(n > 0 && header[0] == '{',
               "{} is corrupted or not a safetensors file: its header does not start with '{{'",
               path_);
    parse_header(header);
    Xxh3Stream hash;
    hash.update(&n, 8);
    hash.update(header.data(), header.size());
    header_xxh3_ = hash.digest();
    const int64_t available = size - data_start_;
    WEFT_CHECK(available >= data_bytes_,
               "{} is truncated: header says {} data bytes, file has {}; the write did not "
               "finish — write the file again or use another copy",
               path_, data_bytes_, available);
    WEFT_CHECK(available == data_bytes_,
               "{} is corrupted: it has {} bytes after the last tensor (header says {} data "
               "bytes, file has {})",
               path_, available - data_bytes_, data_bytes_, available);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

namespace {

void read_metadata(const std::string& path, const Json& value,
                   std::map<std::string, std::string>& metadata) {
  WEFT_CHECK(value.is_object(), "{}: __metadata__ is a JSON {}, not an object", path,
             json_type_name(value.type()));
  for (const auto& [k, v] : value.as_object()) {
    WEFT_CHECK(v.is_string(), "{}: __metadata__ value \"{}\" is a JSON {}, not a string", path, k,
               json_type_name(v.type()));
    metadata[k] = v.as_string();
  }
}

struct TensorFields {
  const Json* dtype;
  const Json* shape;
  const Json* offsets;
};

// A tensor's entry has exactly these three members.
TensorFields tensor_fields(const std::string& where, const Json& value) {
  WEFT_CHECK(value.is_object(), "{} is described by a JSON {}, not an object", where,
             json_type_name(value.type()));
  for (const auto& member : value.as_object()) {
    WEFT_CHECK(member.first == "dtype" || member.first == "shape" || member.first == "data_offsets",
               "{} has an unexpected field \"{}\" (expected dtype, shape and data_offsets)", where,
               member.first);
  }
  const Json* dtype = value.find("dtype");
  const Json* shape = value.find("shape");
  const Json* offsets = value.find("data_offsets");
  WEFT_CHECK(dtype && shape && offsets, "{} lacks {}", where,
             !dtype   ? "its dtype"
             : !shape ? "its shape"
                      : "its data_offsets");
  return {dtype, shape, offsets};
}

// The tensor's size in bits (elements of `element_bits`); appends the
// dimensions to `dims`.
int64_t shape_bits(const std::string& where, const Json& shape, int element_bits,
                   std::vector<int64_t>& dims) {
  WEFT_CHECK(shape.is_array(), "{} has a shape that is not an array", where);
  // Element count times bits, checked for overflow at every step. The
  // product over the non-zero dimensions must fit too: a slice of an empty
  // tensor ([0, 2^62]) multiplies the other dimensions without the zero.
  int64_t bits = element_bits, span_bits = element_bits;
  for (const Json& d : shape.as_array()) {
    WEFT_CHECK(d.is_integer() && d.as_int() >= 0,
               "{} has shape entry {} that is not a non-negative integer", where, d.dump());
    dims.push_back(d.as_int());
    WEFT_CHECK(!__builtin_mul_overflow(bits, d.as_int(), &bits) &&
                   !__builtin_mul_overflow(span_bits, std::max<int64_t>(d.as_int(), 1), &span_bits),
               "{} has shape {} too large to address", where, shape.dump());
  }
  return bits;
}

// Sets info.begin and info.end; they must span the tensor's `bytes`.
void read_data_offsets(const std::string& where, const Json& offsets, int64_t bytes,
                       TensorInfo& info) {
  WEFT_CHECK(offsets.is_array() && offsets.size() == 2 && offsets.at(0).is_integer() &&
                 offsets.at(1).is_integer(),
             "{} has data_offsets {} that are not two integers [begin, end]", where,
             offsets.dump());
  info.begin = offsets.at(0).as_int();
  info.end = offsets.at(1).as_int();
  WEFT_CHECK(info.begin >= 0 && info.begin <= info.end,
             "{} has data_offsets [{}, {}]; they must satisfy 0 <= begin <= end", where, info.begin,
             info.end);
  WEFT_CHECK(info.end - info.begin == bytes,
             "{} has shape {} of {} ({} bytes) but its data_offsets [{}, {}] span {} bytes", where,
             shape_text(info.shape), info.dtype, bytes, info.begin, info.end,
             info.end - info.begin);
}

TensorInfo parse_tensor(const std::string& path, const std::string& name, const Json& value) {
  const std::string where = format("{}: tensor \"{}\"", path, name);
  const TensorFields fields = tensor_fields(where, value);
  WEFT_CHECK(fields.dtype->is_string(), "{} has a dtype that is not a string", where);
  const DtypeEntry* entry = find_dtype(fields.dtype->as_string());
  WEFT_CHECK(entry != nullptr, "{} has unknown dtype \"{}\"", where, fields.dtype->as_string());

  TensorInfo info;
  info.name = name;
  info.dtype = std::string(entry->name);
  info.weft_dtype = entry->weft;
  const int64_t bits = shape_bits(where, *fields.shape, entry->bits, info.shape);
  WEFT_CHECK(bits % 8 == 0, "{} ({} {}) does not fill whole bytes", where, info.dtype,
             fields.shape->dump());
  read_data_offsets(where, *fields.offsets, bits / 8, info);
  return info;
}

// Sorts `tensors` by offset and returns the size of the data area they fill,
// an error unless they pack it without gaps or overlaps.
int64_t packed_data_bytes(const std::string& path, std::vector<TensorInfo>& tensors) {
  std::sort(tensors.begin(), tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
  });
  int64_t end = 0;
  const TensorInfo* previous = nullptr;
  for (const TensorInfo& t : tensors) {
    if (t.begin < end) {
      WEFT_FAIL("{} is corrupted: tensors \"{}\" [{}, {}) and \"{}\" [{}, {}) overlap", path,
                previous->name, previous->begin, previous->end, t.name, t.begin, t.end);
    }
    if (t.begin > end) {
      WEFT_FAIL(
          "{} is corrupted: {} unused bytes before tensor \"{}\" (data bytes [{}, {})); "
          "safetensors packs tensors without gaps",
          path, t.begin - end, t.name, end, t.begin);
    }
    end = t.end;
    previous = &t;
  }
  return end;
}

}  // namespace

void SafetensorsFile::parse_header(const std::string& text) {
  const Json header = parse_json(text, path_ + " header");
  WEFT_CHECK(header.is_object(), "{} header is a JSON {}, not an object", path_,
             json_type_name(header.type()));
  for (const auto& [name, value] : header.as_object()) {
    if (name == "__metadata__") {
      read_metadata(path_, value, metadata_);
    } else {
      tensors_.push_back(parse_tensor(path_, name, value));
    }
  }
  data_bytes_ = packed_data_bytes(path_, tensors_);
}

SafetensorsFile::~SafetensorsFile() {
  if (fd_ >= 0) ::close(fd_);
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      data_start_(other.data_start_),
      data_bytes_(other.data_bytes_),
      header_xxh3_(other.header_xxh3_),
      tensors_(std::move(other.tensors_)),
      metadata_(std::move(other.metadata_)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    data_start_ = other.data_start_;
    data_bytes_ = other.data_bytes_;
    header_xxh3_ = other.header_xxh3_;
    tensors_ = std::move(other.tensors_);
    metadata_ = std::move(other.metadata_);
  }
  return *this;
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  for (const TensorInfo& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const TensorInfo& SafetensorsFile::info(std::string_view name) const {
  if (const TensorInfo* t = find(name)) return *t;
  std::string held;
  for (size_t i = 0; i < tensors_.size() && i < 8; ++i) {
    held += (i ? ", " : "") + tensors_[i].name;
  }
  if (tensors_.size() > 8) held += format(", ... ({} in all)", tensors_.size());
  WEFT_FAIL("{} has no tensor \"{}\" (it holds: {})", path_, name,
            tensors_.empty() ? std::string("nothing") : held);
}

void SafetensorsFile::read_at(void* dst, int64_t bytes, int64_t at, std::string_view tensor) const {
  char* p = static_cast<char*>(dst);
  while (bytes > 0) {
    ssize_t n = ::pread(fd_, p, static_cast<size_t>(std::min<int64_t>(bytes, 1 << 30)), at);
    if (n < 0 && errno == EINTR) continue;
    WEFT_CHECK(n >= 0, "cannot read {}{}: {}", path_,
               tensor.empty() ? "" : format(" (tensor \"{}\")", tensor), errno_text());
    WEFT_CHECK(n > 0, "{} is truncated: it ends at byte {}{}; the file changed after it was opened",
               path_, at, tensor.empty() ? "" : format(" inside tensor \"{}\"", tensor));
    p += n;
    at += n;
    bytes -= n;
  }
}

Tensor SafetensorsFile::load(std::string_view name) const {
  const TensorInfo& t = info(name);
  if (t.shape.empty()) return load_slice(name, -1, 0, 1);
  return load_slice(name, 0, 0, t.shape[0]);
}

Tensor SafetensorsFile::load_in_pieces(
    std::string_view name, const std::function<void(const void*, size_t)>& piece) const {
  const TensorInfo& t = info(name);
  WEFT_CHECK(t.weft_dtype.has_value() && t.shape.size() <= static_cast<size_t>(Shape::kMaxRank),
             "{}: tensor \"{}\" ({}, {} dimensions) cannot be loaded into a weft tensor", path_,
             t.name, t.dtype, t.shape.size());
  Tensor out = Tensor::empty(Shape(std::span<const int64_t>(t.shape)), *t.weft_dtype);
  constexpr int64_t kPiece = 1 << 20;
  char* dst = static_cast<char*>(out.raw());
  for (int64_t done = 0; done < t.nbytes(); done += kPiece) {
    const int64_t n = std::min(kPiece, t.nbytes() - done);
    read_at(dst + done, n, data_start_ + t.begin + done, t.name);
    piece(dst + done, static_cast<size_t>(n));
  }
  return out;
}

Tensor SafetensorsFile::load_slice(std::string_view name, int dim, int64_t begin,
                                   int64_t length) const {
  const TensorInfo& t = info(name);
  WEFT_CHECK(t.weft_dtype.has_value(),
             "{}: tensor \"{}\" is {}, which weft cannot load (it reads F32, BF16, F16, F8_E4M3, "
             "F8_E5M2, F8_E8M0, F4, I32 and U8)",
             path_, t.name, t.dtype);
  WEFT_CHECK(t.shape.size() <= static_cast<size_t>(Shape::kMaxRank),
             "{}: tensor \"{}\" has {} dimensions; weft tensors have at most {}", path_, t.name,
             t.shape.size(), Shape::kMaxRank);
  const DType dtype = *t.weft_dtype;
  const int64_t bits = dtype_bits(dtype);
  std::vector<int64_t> shape = t.shape;
  int64_t outer = 1, inner = 1, extent = 1;
  if (!shape.empty()) {
    WEFT_CHECK(dim >= 0 && dim < static_cast<int>(shape.size()),
               "{}: tensor \"{}\" has no dimension {} (shape {})", path_, t.name, dim,
               shape_text(shape));
    extent = shape[static_cast<size_t>(dim)];
    for (int d = 0; d < dim; ++d) outer *= shape[static_cast<size_t>(d)];
    for (size_t d = static_cast<size_t>(dim) + 1; d < shape.size(); ++d) inner *= shape[d];
    shape[static_cast<size_t>(dim)] = length;
  }
  WEFT_CHECK(begin >= 0 && length >= 0 && begin <= extent - length,
             "{}: slice [{}, {}) of dimension {} is outside tensor \"{}\" of shape {}", path_,
             begin, begin + length, dim, t.name, shape_text(t.shape));
  // Bytes of one contiguous piece and the stride between pieces.
  const int64_t piece_bits = length * inner * bits;
  const int64_t skip_bits = begin * inner * bits;
  WEFT_CHECK(piece_bits % 8 == 0 && skip_bits % 8 == 0,
             "{}: slice [{}, {}) of dimension {} of {} tensor \"{}\" does not fall on byte "
             "boundaries",
             path_, begin, begin + length, dim, t.dtype, t.name);
  const int64_t piece = piece_bits / 8;
  const int64_t stride = extent * inner * bits / 8;

  Tensor out = Tensor::empty(Shape(std::span<const int64_t>(shape)), dtype);
  char* dst = static_cast<char*>(out.raw());
  if (piece == stride || outer == 1) {
    // The pieces are adjacent in the file: one read.
    read_at(dst, piece * outer, data_start_ + t.begin + skip_bits / 8, t.name);
  } else {
    for (int64_t o = 0; o < outer; ++o) {
      read_at(dst + o * piece, piece, data_start_ + t.begin + o * stride + skip_bits / 8, t.name);
    }
  }
  return out;
}

}  // namespace weft::io
