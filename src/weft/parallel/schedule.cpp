#include "weft/parallel/schedule.h"

#include "weft/kernels/activation.h"
#include "weft/parallel/overlap/overlap.h"

namespace weft::parallel {

namespace {

bool trivial(comm::ProcessGroup* g) { return g == nullptr || g->size() == 1; }

}  // namespace

const char* schedule_name(Schedule s) {
  switch (s) {
    case Schedule::plain: return "plain";
    case Schedule::all_gather_gemm: return "all_gather_gemm";
    case Schedule::gemm_reduce_scatter: return "gemm_reduce_scatter";
    case Schedule::gemm_all_reduce: return "gemm_all_reduce";
  }
  return "?";
}

Shape gathered_shape(const Shape& x, comm::ProcessGroup* group) {
  Shape s = x;
  if (!trivial(group)) s[0] *= group->size();
  return s;
}

Shape scattered_shape(const Shape& x, comm::ProcessGroup* group) {
  Shape s = x;
  if (trivial(group)) return s;
  WEFT_CHECK(s[0] % group->size() == 0,
             "reduce-scatter over the {} ranks of group '{}': {} rows (shape {}) do not split "
             "evenly",
             group->size(), group->name(), s[0], x);
  s[0] /= group->size();
  return s;
}

Tensor gemm_input(const ExecContext& ec, DType dtype, const Tensor& x, Tensor& slot) {
  if (x.dtype() == dtype) return x;
  Tensor out = ec.reuse(slot, x.shape(), dtype, MemoryTag::activations);
  out.copy_from(x);
  return out;
}

ScheduledGemm scheduled_gemm(const ExecContext& ec, const GemmCall& call, const Tensor& a,
                             const Tensor& b, const Tensor& out, GemmWorkspace& ws) {
  Schedule s = trivial(call.group) ? Schedule::plain : call.schedule;
  const bool reduces = s == Schedule::gemm_reduce_scatter || s == Schedule::gemm_all_reduce;
  WEFT_CHECK(!(call.async && reduces && call.options.bias),
             "a {} schedule adds its bias after the reduction, so it cannot be left in flight",
             schedule_name(s));
  WEFT_CHECK(!(reduces && call.options.accumulate),
             "a {} schedule cannot accumulate into its output: the sum would be reduced again",
             schedule_name(s));
  WEFT_CHECK(call.options.epilogue == kernels::GemmEpilogue::none ||
                 (s == Schedule::plain && call.quantized == nullptr),
             "{}: a GEMM epilogue ({}) applies to a plain GEMM on unquantized operands, not a {} "
             "schedule",
             call.name, kernels::gemm_epilogue_name(call.options.epilogue), schedule_name(s));
  const QuantizedOperands* q = call.quantized;
  WEFT_CHECK(q || a.dtype() == b.dtype(),
             "{} GEMM: operands are {} and {}; convert with gemm_input", schedule_name(s),
             dtype_name(a.dtype()), dtype_name(b.dtype()));
  WEFT_CHECK(!q || (s != Schedule::all_gather_gemm && call.overlap.method != OverlapMethod::ring &&
                    call.overlap.method != OverlapMethod::pipeline),
             "{}: quantized operands go to schedules that move no operand, without overlap; got "
             "{}",
             call.name, schedule_name(s));
  const Tensor& x = a;
  kernels::GemmOptions opt = call.options;
  Tensor c = out;
  // The local GEMM: on the tensors, or on the quantized operands, the bias
  // added before the output's one rounding, as a GEMM's epilogue adds it (a
  // bf16 output goes through an f32 buffer).
  const auto local_gemm = [&](const Tensor& lhs, Tensor& dst, const kernels::GemmOptions& o) {
    if (q == nullptr) return kernels::gemm(ec, lhs, b, dst, o);
    const kernels::QuantizedGemmOptions qo{
        .accumulate = o.accumulate, .alpha = o.alpha, .fast_accumulation = q->fast_accumulation};
    if (!o.bias) return kernels::quantized_gemm(ec, q->a, q->b, dst, qo);
    if (dst.dtype() == DType::f32) {
      kernels::quantized_gemm(ec, q->a, q->b, dst, qo);
      return kernels::bias_add(ec, dst, *o.bias);
    }
    Tensor wide = ec.empty(dst.shape(), DType::f32, MemoryTag::activations);
    if (o.accumulate) kernels::convert(ec, dst, wide);
    kernels::quantized_gemm(ec, q->a, q->b, wide, qo);
    kernels::bias_add(ec, wide, *o.bias);
    kernels::convert(ec, wide, dst);
  };
  if (call.overlap.method == OverlapMethod::ring ||
      call.overlap.method == OverlapMethod::pipeline) {
    const bool ring = call.overlap.method == OverlapMethod::ring;
    const bool applies = s != Schedule::plain &&
                         (ring ? s != Schedule::gemm_all_reduce : s != Schedule::all_gather_gemm);
    if (!applies) {
      note_overlap_fallback(call.name, call.overlap.method,
                            s == Schedule::plain
                                ? "this GEMM has no collective to overlap (TP 1, or no sequence "
                                  "parallelism for an all-gather or reduce-scatter)"
                            : ring ? "the ring needs sequence parallelism (an all-gather or a "
                                     "reduce-scatter), not an all-reduce"
                                   : "the pipeline splits a reduction, not an all-gather");
    } else if (s == Schedule::all_gather_gemm) {
      Tensor g =
          ec.reuse(ws.gathered, gathered_shape(x.shape(), call.group), x.dtype(), MemoryTag::comm);
      overlap::ring_all_gather_gemm(overlap::beside_comm(ec, call.overlap.comm_cores), *call.group,
                                    x, b, c, opt, g);
      return {.pending = {}, .gathered = g};
    } else {
      opt.bias = nullptr;
      const ExecContext gec = overlap::beside_comm(ec, call.overlap.comm_cores);
      if (ring) {
        overlap::ring_gemm_reduce_scatter(gec, *call.group, x, b, c, opt, ws);
      } else {
        overlap::pipelined_gemm_collective(gec, *call.group, s == Schedule::gemm_reduce_scatter, x,
                                           b, c, opt, call.overlap.num_splits, ws);
      }
      if (call.options.bias) kernels::bias_add(ec, c, *call.options.bias);
      return {};
    }
  }
  switch (s) {
    case Schedule::plain: local_gemm(x, c, opt); return {};
    case Schedule::all_gather_gemm: {
      Tensor g =
          ec.reuse(ws.gathered, gathered_shape(x.shape(), call.group), x.dtype(), MemoryTag::comm);
      call.group->all_gather(g, x).wait(ec);
      kernels::gemm(ec, g, b, c, opt);
      return {.pending = {}, .gathered = g};
    }
    case Schedule::gemm_reduce_scatter: {
      opt.bias = nullptr;
      Tensor p = ec.reuse(ws.partial, gathered_shape(out.shape(), call.group), out.dtype(),
                          MemoryTag::comm);
      local_gemm(x, p, opt);
      comm::Work w = call.group->reduce_scatter(out, p);
      if (call.async) return {.pending = w, .gathered = {}};
      w.wait(ec);
      break;
    }
    case Schedule::gemm_all_reduce: {
      opt.bias = nullptr;
      local_gemm(x, c, opt);
      comm::Work w = call.group->all_reduce(out);
      if (call.async) return {.pending = w, .gathered = {}};
      w.wait(ec);
      break;
    }
  }
  if (call.options.bias) kernels::bias_add(ec, c, *call.options.bias);
  return {};
}

}  // namespace weft::parallel
