#include "weft/core/error.h"

#include <cstring>

namespace weft {

void throw_error(const char* file, int line, std::string message) {
  const char* base = std::strrchr(file, '/');
  base = base ? base + 1 : file;
  throw Error(std::move(message), format("{}:{}", base, line));
}

}  // namespace weft
