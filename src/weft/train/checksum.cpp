#include "weft/train/checksum.h"

// The header-only form: no library to link, here or in projects that link weft.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace weft::train {

uint64_t xxh3(const void* data, size_t bytes) { return XXH3_64bits(data, bytes); }

struct Xxh3Stream::State {
  XXH3_state_t s;
};

Xxh3Stream::Xxh3Stream() : state_(std::make_unique<State>()) { XXH3_64bits_reset(&state_->s); }
Xxh3Stream::~Xxh3Stream() = default;

void Xxh3Stream::update(const void* data, size_t bytes) {
  XXH3_64bits_update(&state_->s, data, bytes);
}

uint64_t Xxh3Stream::digest() const { return XXH3_64bits_digest(&state_->s); }

std::string checksum_hex(uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = kDigits[v & 15];
  return s;
}

std::optional<uint64_t> checksum_from_hex(std::string_view s) {
  if (s.size() != 16) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return std::nullopt;
    }
    v = v << 4 | static_cast<uint64_t>(d);
  }
  return v;
}

}  // namespace weft::train
