// Where a tensor lives: the host ("cpu") or a CUDA device ("cuda:N").
#pragma once

#include <ostream>
#include <string>
#include <string_view>

#include "weft/core/error.h"

namespace weft {

struct Device {
  enum class Kind : uint8_t { cpu, cuda };
  Kind kind = Kind::cpu;
  int index = 0;

  static Device cpu() { return {}; }
  static Device cuda(int i) { return {Kind::cuda, i}; }
  // "cpu", "cuda", "cuda:N"; throws weft::Error otherwise.
  static Device parse(std::string_view text);

  bool is_cpu() const { return kind == Kind::cpu; }
  bool is_cuda() const { return kind == Kind::cuda; }
  std::string str() const;
  friend bool operator==(const Device&, const Device&) = default;
};

inline std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

}  // namespace weft

template <>
struct fmt::formatter<weft::Device> : weft::StrFormatter<weft::Device> {};
