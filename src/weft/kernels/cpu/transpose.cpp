#include "weft/kernels/impl/transpose.h"

#include <cstring>

#include "weft/core/exec_context.h"

namespace weft::kernels::impl {

template <>
void transpose01<Backend::cpu>(const ExecContext& ec, const Tensor& in, Tensor& out) {
  const int64_t rows = in.size(0), cols = in.size(1);
  const int64_t inner = rows * cols == 0 ? 0 : in.numel() / (rows * cols);
  const int64_t bytes = inner * dtype_bits(in.dtype()) / 8;
  if (rows * cols == 0 || bytes == 0) return;
  const char* src = static_cast<const char*>(in.raw());
  char* dst = static_cast<char*>(out.raw());
  // One output row (j, i) per iteration: consecutive iterations write
  // consecutive memory.
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
  for (int64_t n = 0; n < rows * cols; ++n) {
    const int64_t j = n / rows, i = n % rows;
    std::memcpy(dst + n * bytes, src + (i * cols + j) * bytes, static_cast<size_t>(bytes));
  }
}

}  // namespace weft::kernels::impl
