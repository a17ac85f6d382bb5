// Shared pieces of the fuzz targets (tests/fuzz/*_fuzz.cpp).
//
// Each target defines LLVMFuzzerTestOneInput. A weft::Error is how weft
// refuses bad input, so a target catches that (and only that): any other
// exception, a sanitizer report, a hang or a large allocation on a small
// input is a finding. The same entry points are linked with libFuzzer in the
// clang build (-DWEFT_FUZZ=ON) and with replay_main.cpp in the normal build,
// where ctest replays the seed corpus and every saved crash input.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "weft/core/error.h"

namespace weft::fuzz {

// Runs fn; a weft::Error (bad input refused) is the expected way to fail.
// WEFT_FUZZ_VERBOSE=1 prints the refusals (to see how far a seed gets).
template <typename Fn>
void refused_ok(Fn&& fn) {
  try {
    fn();
  } catch (const weft::Error& e) {
    static const bool verbose = std::getenv("WEFT_FUZZ_VERBOSE") != nullptr;
    if (verbose) std::fprintf(stderr, "refused: %s\n", e.what());
  }
}

// A directory of this process for the files a target writes, removed at exit.
inline const std::string& scratch_dir() {
  struct Dir {
    std::string path;
    Dir() {
      std::string tmpl = (std::filesystem::temp_directory_path() / "weft-fuzz-XXXXXX").string();
      if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
      path = tmpl;
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Dir dir;
  return dir.path;
}

inline void write_file(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) std::abort();
}

// The parts of `text` between `sep` bytes, at most `max_parts` (the last part
// keeps any further separators).
inline std::vector<std::string_view> split(std::string_view text, char sep, size_t max_parts) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < max_parts) {
    const size_t at = text.find(sep);
    if (at == std::string_view::npos) break;
    parts.push_back(text.substr(0, at));
    text.remove_prefix(at + 1);
  }
  parts.push_back(text);
  return parts;
}

// Takes small numbers off the front of the input (zeros once it is used up).
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : rest_(reinterpret_cast<const char*>(data), size) {}
  uint8_t byte() {
    if (rest_.empty()) return 0;
    const auto b = static_cast<uint8_t>(rest_.front());
    rest_.remove_prefix(1);
    return b;
  }
  // A value in [lo, hi] from the next two bytes.
  int64_t in_range(int64_t lo, int64_t hi) {
    const auto v = static_cast<uint16_t>(byte() | (byte() << 8));
    return lo + static_cast<int64_t>(v % static_cast<uint64_t>(hi - lo + 1));
  }
  std::string_view rest() const { return rest_; }

 private:
  std::string_view rest_;
};

}  // namespace weft::fuzz
