#include "weft/kernels/transpose.h"

#include "weft/kernels/dispatch.h"
#include "weft/kernels/impl/transpose.h"

namespace weft::kernels {

void transpose01(const ExecContext& ec, const Tensor& in, Tensor& out) {
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
  const auto* src = static_cast<const char*>(in.raw());
  const auto* dst = static_cast<const char*>(out.raw());
  WEFT_CHECK(in.numel() == 0 || dst + out.nbytes() <= src || src + in.nbytes() <= dst,
             "transpose01 cannot write its output over its input");
  return detail::dispatch(ec, "transpose01", {&in, &out},
                          [&]<Backend B>() { return impl::transpose01<B>(ec, in, out); });
}

}  // namespace weft::kernels
