// The JSON parser (train/json.h): any text either parses or is a JsonError;
// what parses dumps (compact and pretty) to text that parses back equal, and
// dumping that gives the same bytes again.
#include <cstdlib>

#include "fuzz.h"
#include "weft/io/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using weft::io::Json;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Json value;
  try {
    value = weft::io::parse_json(text, "fuzz input");
  } catch (const weft::io::JsonError& e) {
    if (e.offset() > size) std::abort();  // the offset must point into the text
    return 0;
  }
  for (int indent : {-1, 0, 2}) {
    // The parser refuses what the writer cannot write (1e999, invalid UTF-8),
    // so nothing here may throw.
    const std::string dumped = value.dump(indent);
    const Json again = weft::io::parse_json(dumped, "dumped");
    if (!(again == value)) std::abort();
    if (again.dump(indent) != dumped) std::abort();
  }
  return 0;
}
