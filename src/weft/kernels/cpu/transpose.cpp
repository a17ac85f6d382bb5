#include "weft/kernels/cpu/transpose.h"

#include <cstring>

#include "weft/core/exec_context.h"

namespace weft::kernels::cpu {

void transpose01(const ExecContext& ec, const Tensor& in, Tensor& out) {
  WEFT_CHECK(in.device().is_cpu() && out.device().is_cpu(),
             "transpose01: tensors on {} and {}, but this kernel runs on the cpu", in.device(),
             out.device());
  const int64_t rows = in.size(0), cols = in.size(1);
  const int64_t inner = rows * cols == 0 ? 0 : in.numel() / (rows * cols);
  const int64_t bytes = inner * dtype_bits(in.dtype()) / 8;
  if (rows * cols == 0 || bytes == 0) return;
  const char* src = static_cast<const char*>(in.raw());
  char* dst = static_cast<char*>(out.raw());
  WEFT_CHECK(dst + out.nbytes() <= src || src + in.nbytes() <= dst,
             "transpose01 cannot write its output over its input");
  // One output row (j, i) per iteration: consecutive iterations write
  // consecutive memory.
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
  for (int64_t n = 0; n < rows * cols; ++n) {
    const int64_t j = n / rows, i = n % rows;
    std::memcpy(dst + n * bytes, src + (i * cols + j) * bytes, static_cast<size_t>(bytes));
  }
}

}  // namespace weft::kernels::cpu
