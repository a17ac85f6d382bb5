// safetensors files (the Hugging Face format): write atomically, read safely.
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON header,
// then the raw little-endian tensor data. The header is one object:
//   {"__metadata__": {"key": "value", ...},
//    "name": {"dtype": "F32", "shape": [r, c], "data_offsets": [begin, end]}, ...}
// with offsets in bytes from the start of the data area. The writer packs the
// tensors in the order given, writes "__metadata__" first (when not empty) and
// pads the header with spaces to a multiple of 8, so the data starts 8-aligned.
//
// weft's types map to safetensors names as f32 F32, bf16 BF16, f16 F16,
// fp8_e4m3 F8_E4M3, fp8_e5m2 F8_E5M2, e8m0 F8_E8M0, fp4_e2m1 F4 (shape counts
// elements, two per byte, the lower index in the low nibble), i32 I32, u8 U8.
// Files may also hold the other safetensors types (BOOL, I8, I16, U16, U32,
// I64, U64, F64, C64, F6_E2M3, F6_E3M2, F8_E4M3FNUZ, F8_E5M2FNUZ): they are
// listed by inspection but cannot be loaded into a weft Tensor.
//
// Reading treats the file as untrusted. Before any tensor is returned the
// header is checked completely: the header length against the file size (and
// a 100 MB cap), strict JSON (safetensors headers hold no code; nothing is
// ever evaluated), known dtype names, shapes of non-negative integers whose
// byte size (without overflow) equals the data_offsets range, and offsets
// that tile the data area exactly from 0 to its end — no overlap, no gap, no
// trailing bytes (the format's rule against polyglot files). Every failure is
// a weft::Error naming the file and what is wrong. Data is read with pread
// into freshly allocated tensors, only the bytes asked for.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/core/tensor.h"

namespace weft::io {

// "F32", "BF16", ... for a weft dtype.
std::string_view safetensors_dtype_name(DType t);
// The weft dtype of a safetensors dtype name; empty for names weft cannot
// load (or that are not safetensors names at all).
std::optional<DType> dtype_from_safetensors(std::string_view name);

struct TensorInfo {
  std::string name;
  std::string dtype;                     // as the file spells it: "F32", "I64", ...
  std::optional<DType> weft_dtype = {};  // empty when weft has no such type
  std::vector<int64_t> shape;
  int64_t begin = 0;  // byte offsets in the data area: [begin, end)
  int64_t end = 0;

  int64_t numel() const;
  int64_t nbytes() const { return end - begin; }
};

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// Writes `tensors` (CPU, names unique and non-empty, not "__metadata__") and
// `metadata` to `path`: first to `path`.tmp in the same directory, then fsync,
// rename over `path` and fsync of the directory. On any failure (unwritable
// directory, disk full, ...) the temporary file is removed, an existing `path`
// is left as it was, and a weft::Error says what happened.
void write_safetensors(const std::string& path, std::span<const NamedTensor> tensors,
                       const std::map<std::string, std::string>& metadata = {});

class SafetensorsFile {
 public:
  // Opens `path` and validates its header (see above); reads no tensor data.
  explicit SafetensorsFile(std::string path);
  ~SafetensorsFile();
  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // Every tensor, in data-offset order.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // nullptr when the file has no tensor `name`.
  const TensorInfo* find(std::string_view name) const;
  // The tensor `name`; a weft::Error listing what the file holds when absent.
  const TensorInfo& info(std::string_view name) const;
  // Size of the data area (the sum of all tensor sizes).
  int64_t data_bytes() const { return data_bytes_; }
  // XXH3-64 of the bytes before the data area: the length field and the header.
  uint64_t header_xxh3() const { return header_xxh3_; }

  // The whole tensor `name`.
  Tensor load(std::string_view name) const;
  // Indices [begin, begin + length) of dimension `dim` of tensor `name`, all
  // of the other dimensions: reads only those bytes (one contiguous read when
  // dim is 0 or every dimension before it has size 1).
  Tensor load_slice(std::string_view name, int dim, int64_t begin, int64_t length) const;
  // The whole tensor `name`, read in pieces of at most 1 MiB (a multiple
  // of 4 bytes): `piece(data, bytes)` sees each right after it was read,
  // while it is in cache (to hash it, or scan it, without a second pass).
  Tensor load_in_pieces(std::string_view name,
                        const std::function<void(const void*, size_t)>& piece) const;
  // Rows [begin, begin + length) of dimension 0.
  Tensor load_rows(std::string_view name, int64_t begin, int64_t length) const {
    return load_slice(name, 0, begin, length);
  }

 private:
  void parse_header(const std::string& header);
  // Reads `bytes` at absolute file offset `at`; errors name `tensor` when given.
  void read_at(void* dst, int64_t bytes, int64_t at, std::string_view tensor) const;

  std::string path_;
  int fd_ = -1;
  int64_t data_start_ = 0;  // 8 + N
  int64_t data_bytes_ = 0;
  uint64_t header_xxh3_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace weft::io
