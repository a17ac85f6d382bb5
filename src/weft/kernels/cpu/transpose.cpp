#include "weft/kernels/cpu/transpose.h"

#include <cstring>

#include "weft/core/exec_context.h"

namespace weft::kernels::cpu {

void transpose01(const ExecContext& ec, const Tensor& in, Tensor& out) {
  WEFT_CHECK(in.device().is_cpu() && out.device().is_cpu(),
             "transpose01: tensors on {} and {}, but this kernel runs on the cpu", in.device(),
             out.device());
  WEFT_CHECK(in.dim() >= 2, "transpose01 needs a tensor of rank >= 2, got shape {}", in.shape());
  Shape swapped = in.shape();
  swapped[0] = in.size(1);
  swapped[1] = in.size(0);
  WEFT_CHECK(out.shape() == swapped && out.dtype() == in.dtype(),
             "transpose01 of {} {} writes {} {}, got {} {}", dtype_name(in.dtype()), in.shape(),
             dtype_name(in.dtype()), swapped, dtype_name(out.dtype()), out.shape());
  const int64_t rows = in.size(0), cols = in.size(1);
  const int64_t inner = rows * cols == 0 ? 0 : in.numel() / (rows * cols);
  WEFT_CHECK(inner * dtype_bits(in.dtype()) % 8 == 0,
             "transpose01 of {} {}: the trailing dimensions hold a fraction of a byte",
             dtype_name(in.dtype()), in.shape());
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
