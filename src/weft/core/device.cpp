#include "weft/core/device.h"

#include <charconv>

#include "weft/core/error.h"

namespace weft {

Device Device::parse(std::string_view text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.starts_with("cuda:")) {
    std::string_view num = text.substr(5);
    int index = -1;
    auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), index);
    if (ec == std::errc() && end == num.data() + num.size() && index >= 0) return cuda(index);
  }
  WEFT_FAIL("unknown device '{}': use cpu, cuda or cuda:N", text);
}

std::string Device::str() const { return is_cpu() ? "cpu" : format("cuda:{}", index); }

}  // namespace weft
