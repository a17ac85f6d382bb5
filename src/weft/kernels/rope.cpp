#include "weft/kernels/rope.h"

#include <cmath>
#include <vector>

#include "weft/kernels/dispatch.h"
#include "weft/kernels/elementwise.h"
#include "weft/kernels/impl/rope.h"

namespace weft::kernels {

namespace {

impl::RopeDims check_rope(const char* op, const Tensor& qkv, const Tensor& table,
                          const RopeConfig& cfg) {
  detail::check_float(qkv, op);
  WEFT_CHECK(qkv.dim() == 3, "{}: qkv must be {}, got shape {}", op,
             cfg.sequence_major ? "(T, B, (H + 2·Hkv)·D)" : "(B, T, (H + 2·Hkv)·D)", qkv.shape());
  WEFT_CHECK(cfg.heads >= 1 && cfg.kv_heads >= 0,
             "{}: needs at least one head and kv_heads >= 0 (0: heads), got {} and {}", op,
             cfg.heads, cfg.kv_heads);
  const int64_t kv = cfg.kv_heads == 0 ? cfg.heads : cfg.kv_heads;
  const int64_t parts = cfg.heads + 2 * kv, width = qkv.size(2);
  WEFT_CHECK(width > 0 && width % parts == 0 && (width / parts) % 2 == 0,
             "{}: qkv {} must have a last dimension (H + 2·Hkv)·D = {}·D with D even, for {} "
             "heads and {} key/value heads",
             op, qkv.shape(), parts, cfg.heads, kv);
  const int64_t D = width / parts;
  const int64_t B = cfg.sequence_major ? qkv.size(1) : qkv.size(0);
  const int64_t T = cfg.sequence_major ? qkv.size(0) : qkv.size(1);
  WEFT_CHECK(cfg.position_offset >= 0, "{}: position_offset must be >= 0, got {}", op,
             cfg.position_offset);
  WEFT_CHECK(table.dtype() == DType::f32 && table.dim() == 3 && table.size(1) == D / 2 &&
                 table.size(2) == 2,
             "{}: the table must be f32 (P, D/2 = {}, 2) from rope_table, got {} {}", op, D / 2,
             dtype_name(table.dtype()), table.shape());
  WEFT_CHECK(table.size(0) >= T + cfg.position_offset,
             "{}: the table covers positions below {}, but the rows reach position {} (T = {}, "
             "position_offset = {})",
             op, table.size(0), T + cfg.position_offset - 1, T, cfg.position_offset);
  return {B, T, D, cfg.heads + kv, width, cfg.sequence_major, cfg.position_offset};
}

}  // namespace

Tensor rope_table(const ExecContext& ec, int64_t positions, int64_t head_dim, double theta) {
  WEFT_CHECK(positions >= 0, "rope_table: positions must be >= 0, got {}", positions);
  WEFT_CHECK(head_dim > 0 && head_dim % 2 == 0,
             "rope_table: head_dim must be even and positive, "
             "got {}",
             head_dim);
  WEFT_CHECK(theta > 0.0 && std::isfinite(theta), "rope_table: theta must be positive, got {}",
             theta);
  const int64_t half = head_dim / 2;
  std::vector<float> v(static_cast<size_t>(positions * half * 2));
  for (int64_t i = 0; i < half; ++i) {
    const double freq =
        std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    for (int64_t p = 0; p < positions; ++p) {
      const double angle = static_cast<double>(p) * freq;
      v[static_cast<size_t>((p * half + i) * 2)] = static_cast<float>(std::cos(angle));
      v[static_cast<size_t>((p * half + i) * 2 + 1)] = static_cast<float>(std::sin(angle));
    }
  }
  // Computed on the host in double whatever the device, so that every
  // backend rotates by the same f32 numbers.
  return Tensor::from({positions, half, 2}, v).to(ec.device());
}

void rope_forward(const ExecContext& ec, Tensor& qkv, const Tensor& table,
                  const RopeConfig& config) {
  const impl::RopeDims d = check_rope("rope_forward", qkv, table, config);
  return detail::dispatch(ec, "rope_forward", {&qkv, &table}, [&]<Backend B>() {
    return impl::rope_rotate<B>(ec, qkv, table, d, 1.0f);
  });
}

void rope_backward(const ExecContext& ec, Tensor& dqkv, const Tensor& table,
                   const RopeConfig& config) {
  const impl::RopeDims d = check_rope("rope_backward", dqkv, table, config);
  return detail::dispatch(ec, "rope_backward", {&dqkv, &table}, [&]<Backend B>() {
    return impl::rope_rotate<B>(ec, dqkv, table, d, -1.0f);
  });
}

}  // namespace weft::kernels
