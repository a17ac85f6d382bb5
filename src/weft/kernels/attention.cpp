#include "weft/kernels/attention.h"

#include "weft/core/cuda.h"
#include "weft/kernels/attention_dims.h"
#include "weft/kernels/dispatch.h"
#include "weft/kernels/elementwise.h"
#include "weft/kernels/impl/attention.h"

namespace weft::kernels {

namespace {

using detail::AttentionDims;

// A block of `T` rows of a longer sequence (AttentionConfig::sequence).
void check_positions(const AttentionConfig& cfg, int64_t T) {
  if (cfg.sequence == 0) {
    WEFT_CHECK(cfg.query_position == 0 && cfg.key_position == 0,
               "attention query_position {} and key_position {} need the sequence they are "
               "positions of (AttentionConfig::sequence)",
               cfg.query_position, cfg.key_position);
    return;
  }
  WEFT_CHECK(cfg.query_position >= cfg.key_position && cfg.key_position >= 0 &&
                 cfg.query_position + T <= cfg.sequence,
             "attention block of {} rows: query_position {} and key_position {} must satisfy "
             "0 <= key_position <= query_position and query_position + rows <= sequence {}",
             T, cfg.query_position, cfg.key_position, cfg.sequence);
}

AttentionDims check_qkv(const Tensor& qkv, const AttentionConfig& cfg) {
  detail::check_float(qkv, "attention qkv");
  WEFT_CHECK(qkv.dim() == 3, "attention qkv must be {}, got shape {}",
             cfg.sequence_major ? "(T, B, (H + 2·Hkv)·D)" : "(B, T, (H + 2·Hkv)·D)", qkv.shape());
  WEFT_CHECK(cfg.heads >= 1, "attention needs at least one head, got {}", cfg.heads);
  WEFT_CHECK(cfg.kv_heads >= 0 && cfg.kv_heads <= cfg.heads,
             "attention kv_heads must lie in [0, heads = {}] (0: heads), got {}", cfg.heads,
             cfg.kv_heads);
  const int64_t kv = detail::kv_heads(cfg);
  WEFT_CHECK(cfg.heads % kv == 0,
             "attention heads ({}) must be a multiple of kv_heads ({}): each key/value head "
             "serves the same number of query heads",
             cfg.heads, kv);
  const int64_t width = qkv.size(2), parts = cfg.heads + 2 * kv;
  WEFT_CHECK(width > 0 && width % parts == 0,
             "attention qkv {} must have a last dimension (H + 2·Hkv)·D = {}·D for {} heads and "
             "{} key/value heads",
             qkv.shape(), parts, cfg.heads, kv);
  WEFT_CHECK(cfg.dropout >= 0.0f && cfg.dropout < 1.0f,
             "attention dropout must lie in [0, 1), got {}", cfg.dropout);
  const detail::AttentionDims d = detail::attention_dims(qkv, cfg);
  check_positions(cfg, d.T);
  WEFT_CHECK(cfg.sequence == 0 || qkv.device().is_cpu(),
             "attention over a block of a longer sequence (context parallelism) runs on the CPU "
             "kernels only, got qkv on {}",
             qkv.device());
  return d;
}

}  // namespace

void attention_forward(const ExecContext& ec, const Tensor& qkv, const AttentionConfig& config,
                       Tensor& out, AttentionSaved& saved, AttentionWorkspace& workspace) {
  const AttentionDims d = check_qkv(qkv, config);
  const DType dt = qkv.dtype();
  WEFT_CHECK(out.shape() == d.tokens(d.C) && out.dtype() == dt,
             "attention output must be {} {} for qkv {}, got {} {}", dtype_name(dt), d.tokens(d.C),
             qkv.shape(), dtype_name(out.dtype()), out.shape());
  return detail::dispatch(
      ec, "attention_forward",
      {&qkv, &out, &saved.lse, &saved.out, &saved.probs, &workspace.buffer}, [&]<Backend B>() {
        return impl::attention_forward<B>(ec, qkv, config, out, saved, workspace);
      });
}

void attention_backward(const ExecContext& ec, const Tensor& dout, const Tensor& qkv,
                        const AttentionSaved& saved, const AttentionConfig& config, Tensor& dqkv,
                        AttentionWorkspace& workspace) {
  const AttentionDims d = check_qkv(qkv, config);
  const DType dt = qkv.dtype();
  WEFT_CHECK(dout.shape() == d.tokens(d.C) && dout.dtype() == dt,
             "attention output gradient must be {} {} for qkv {}, got {} {}", dtype_name(dt),
             d.tokens(d.C), qkv.shape(), dtype_name(dout.dtype()), dout.shape());
  WEFT_CHECK(dqkv.shape() == qkv.shape() && dqkv.dtype() == dt,
             "attention qkv gradient must be {} {} like qkv, got {} {}", dtype_name(dt),
             qkv.shape(), dtype_name(dqkv.dtype()), dqkv.shape());
  WEFT_CHECK(dqkv.raw() != qkv.raw() && dqkv.raw() != dout.raw(),
             "attention backward cannot write dqkv over qkv or dout");
  const Shape rows{d.B, d.H, d.T};
  WEFT_CHECK(saved.lse.defined() && saved.lse.shape() == rows && saved.lse.dtype() == DType::f32 &&
                 saved.out.defined() && saved.out.shape() == d.tokens(d.C) &&
                 saved.out.dtype() == dt,
             "attention backward needs the saved state of the forward of qkv {}: lse f32 {} and "
             "the output {} {}",
             qkv.shape(), rows, dtype_name(dt), d.tokens(d.C));
  return detail::dispatch(
      ec, "attention_backward",
      {&dout, &qkv, &saved.lse, &saved.out, &saved.probs, &dqkv, &workspace.buffer},
      [&]<Backend B>() {
        return impl::attention_backward<B>(ec, dout, qkv, saved, config, dqkv, workspace);
      });
}

namespace {

// The shape of a decode call: qkv's dims (T = S, the new rows), checked against
// the positions and the caches.
AttentionDims check_decode(const char* op, const Tensor& qkv, std::span<const int64_t> start,
                           const AttentionConfig& cfg, const Tensor& k_cache,
                           const Tensor& v_cache) {
  WEFT_CHECK(!cfg.sequence_major && cfg.causal && cfg.dropout == 0.0f,
             "{}: generation's attention is batch-major and causal, without dropout", op);
  const AttentionDims d = check_qkv(qkv, cfg);
  WEFT_CHECK(static_cast<int64_t>(start.size()) == d.B, "{}: {} start positions for a batch of {}",
             op, start.size(), d.B);
  WEFT_CHECK(k_cache.dim() == 4 && k_cache.size(0) == d.B && k_cache.size(1) == d.Hkv &&
                 k_cache.size(3) == d.D && k_cache.dtype() == qkv.dtype() &&
                 v_cache.shape() == k_cache.shape() && v_cache.dtype() == qkv.dtype(),
             "{}: the caches must be {} (B = {}, Hkv = {}, L, D = {}) like qkv {} {}, got {} {} "
             "and {} {}",
             op, dtype_name(qkv.dtype()), d.B, d.Hkv, d.D, dtype_name(qkv.dtype()), qkv.shape(),
             dtype_name(k_cache.dtype()), k_cache.shape(), dtype_name(v_cache.dtype()),
             v_cache.shape());
  for (size_t b = 0; b < start.size(); ++b) {
    WEFT_CHECK(start[b] >= 0 && start[b] + d.T <= k_cache.size(2),
               "{}: batch entry {}'s new positions [{}, {}) do not fit the cache's {} positions",
               op, b, start[b], start[b] + d.T, k_cache.size(2));
  }
  return d;
}

}  // namespace

void kv_cache_write(const ExecContext& ec, const Tensor& qkv, std::span<const int64_t> start,
                    const AttentionConfig& config, Tensor& k_cache, Tensor& v_cache) {
  check_decode("kv_cache_write", qkv, start, config, k_cache, v_cache);
  WEFT_CHECK(k_cache.raw() != v_cache.raw(), "kv_cache_write: k and v must be separate caches");
  return detail::dispatch_cpu_only(ec, "kv_cache_write", {&qkv, &k_cache, &v_cache}, [&] {
    return impl::kv_cache_write<Backend::cpu>(ec, qkv, start, config, k_cache, v_cache);
  });
}

void attention_decode(const ExecContext& ec, const Tensor& qkv, std::span<const int64_t> start,
                      const AttentionConfig& config, const Tensor& k_cache, const Tensor& v_cache,
                      Tensor& out, AttentionWorkspace& workspace) {
  const AttentionDims d = check_decode("attention_decode", qkv, start, config, k_cache, v_cache);
  WEFT_CHECK(out.shape() == d.tokens(d.C) && out.dtype() == qkv.dtype(),
             "attention_decode: the output must be {} {} for qkv {}, got {} {}",
             dtype_name(qkv.dtype()), d.tokens(d.C), qkv.shape(), dtype_name(out.dtype()),
             out.shape());
  return detail::dispatch_cpu_only(ec, "attention_decode",
                                   {&qkv, &k_cache, &v_cache, &out, &workspace.buffer}, [&] {
                                     return impl::attention_decode<Backend::cpu>(
                                         ec, qkv, start, config, k_cache, v_cache, out, workspace);
                                   });
}

Tensor attention_dropout_mask(const ExecContext& ec, const AttentionConfig& config, int64_t batch,
                              int64_t seq) {
  if (config.dropout > 0.0f) {
    WEFT_CHECK(batch >= 0 && seq >= 0 && config.heads >= 1,
               "attention dropout mask needs a batch, length and head count, got {}, {}, {}", batch,
               seq, config.heads);
    check_positions(config, seq);
    WEFT_CHECK(config.sequence == 0 || ec.device().is_cpu(),
               "the dropout mask of a block of a longer sequence (context parallelism) is the CPU "
               "kernels', got a context on {}",
               ec.device());
  }
  return detail::dispatch(ec, "attention_dropout_mask", {}, [&]<Backend B>() {
    return impl::attention_dropout_mask<B>(ec, config, batch, seq);
  });
}

const char* attention_path(Device device, DType dtype, int64_t head_dim,
                           const AttentionConfig& config) {
  if (device.is_cpu()) return "cpu";
#if WEFT_HAVE_CUDA
  return impl::attention_path<Backend::cuda>(dtype, head_dim, config);
#else
  (void)dtype;
  (void)head_dim;
  (void)config;
  WEFT_FAIL("attention_path: {}: {}", device, weft::cuda::unavailable_reason());
#endif
}

std::string attention_cudnn_status(Device device) {
  if (device.is_cpu()) return "cpu";
#if WEFT_HAVE_CUDA
  return impl::attention_cudnn_status<Backend::cuda>();
#else
  WEFT_FAIL("attention_cudnn_status: {}: {}", device, weft::cuda::unavailable_reason());
#endif
}

}  // namespace weft::kernels
