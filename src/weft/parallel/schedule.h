// GEMM schedules: how a Linear combines a GEMM with the collective that goes
// with it. Written once against ProcessGroup/Work and the kernels, so the CPU
// and the GPU share them; the overlap issue adds chunked and ring variants
// behind the same call.
//
//   plain                out = a · op(b) [+ bias]
//   all_gather_gemm      out = all_gather(a) · op(b) [+ bias]
//                        a is this rank's block of rows; out covers the group's
//   gemm_reduce_scatter  out = reduce_scatter(a · op(b)) [+ bias]
//                        out is this rank's block of rows of the sum
//   gemm_all_reduce      out = all_reduce(a · op(b)) [+ bias]
//
// Collectives run along dimension 0 (rows: tokens in the residual-stream
// layout, see context.h), on the tensors themselves — no staging copies. A
// null group, or one of one rank, makes every schedule plain.
//
// The bias rule lives here, once: a bias is added by the GEMM when the
// product is complete on this rank (plain, all-gather), and after the
// reduction when the GEMM makes partial sums (reduce-scatter, all-reduce), so
// that it is counted once.
//
// Where a GEMM takes its inputs is one of the two places conversions happen:
// the weight source hands out the weight in the recipe's GEMM input dtype and
// gemm_input() converts the activation; a and b must then agree.
#pragma once

#include "weft/comm/process_group.h"
#include "weft/core/exec_context.h"
#include "weft/kernels/gemm.h"
#include "weft/parallel/overlap/config.h"
#include "weft/parallel/workspace.h"

namespace weft::parallel {

enum class Schedule : uint8_t { plain, all_gather_gemm, gemm_reduce_scatter, gemm_all_reduce };
const char* schedule_name(Schedule s);

// The quantized operands of a native quantized GEMM
// (GemmQuantizer::native_gemm): the schedule's GEMM is then
// kernels::quantized_gemm(a, b) (plus the bias) instead of a · op(b) on the
// tensors. Only schedules that move no operand take them: plain,
// gemm_reduce_scatter and gemm_all_reduce, without overlap.
struct QuantizedOperands {
  kernels::QuantizedOperand a, b;
  bool fast_accumulation = false;  // the forward GEMM's (Transformer Engine's choice)
};

struct GemmCall {
  Schedule schedule = Schedule::plain;
  comm::ProcessGroup* group = nullptr;
  kernels::GemmOptions options{};
  // Leave the trailing collective (reduce-scatter, all-reduce) in flight and
  // return its Work: `out` must not be read before it is done. Not with a bias.
  bool async = false;
  // The overlap algorithm (overlap/config.h): ring for all-gather→GEMM and
  // GEMM→reduce-scatter, pipeline for GEMM→reduce-scatter and GEMM→all-reduce.
  // A method that does not apply runs the schedule as it is and says so once,
  // naming `name` (the GEMM, "fc1_fprop"). The overlapped schedules complete
  // before they return (async is ignored).
  OverlapChoice overlap{};
  const char* name = "";
  // Native quantized operands; the tensors a and b are then unused (b may
  // be undefined).
  const QuantizedOperands* quantized = nullptr;
};

// x in the GEMM input dtype `dtype`: x itself when it already is, otherwise
// converted into `slot` (reused across calls). The one place an activation is
// converted for a GEMM.
Tensor gemm_input(const ExecContext& ec, DType dtype, const Tensor& x, Tensor& slot);

struct ScheduledGemm {
  comm::Work pending;  // the collective left in flight (async), else complete
  Tensor gathered;     // all_gather_gemm: the gathered `a`, in ws (read it before the next call)
};

// Runs `call` on `ec`; `out` has the result's shape. The schedule's buffers
// come from `ws` (Workspace::gemm: shared by a model's modules, so steady
// state allocates nothing and costs one buffer per role). A row-parallel
// backward's wgrad GEMM reads the returned `gathered` again.
ScheduledGemm scheduled_gemm(const ExecContext& ec, const GemmCall& call, const Tensor& a,
                             const Tensor& b, const Tensor& out, GemmWorkspace& ws);

// The rows of `x` once gathered over `group` along dimension 0: shape with
// dim 0 multiplied by the group's size (x's shape without a group).
Shape gathered_shape(const Shape& x, comm::ProcessGroup* group);
// ... and once reduce-scattered: dim 0 divided by the size (checked).
Shape scattered_shape(const Shape& x, comm::ProcessGroup* group);

}  // namespace weft::parallel
