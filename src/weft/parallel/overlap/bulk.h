// Bulk overlap in a Linear's backward (Megatron's order, the default): the
// collectives that do not feed the next GEMM run beside it instead of before
// it. A column-parallel layer under sequence parallelism re-gathers its input
// shard while the dgrad GEMM runs, and the dgrad's collective (all-reduce, or
// reduce-scatter under SP) stays in flight while the wgrad GEMM runs. With an
// overlap configuration for the layer, a dgrad or wgrad set to another method
// runs its collective on its own (ring and pipeline run the dgrad's).
#pragma once

#include <functional>

#include "weft/comm/process_group.h"
#include "weft/core/exec_context.h"
#include "weft/parallel/overlap/config.h"
#include "weft/parallel/schedule.h"
#include "weft/parallel/workspace.h"

namespace weft::parallel::overlap {

struct BulkBackward {
  bool dgrad = true;  // the dgrad GEMM's collective runs beside the wgrad GEMM
  bool wgrad = true;  // the input re-gather runs beside the dgrad GEMM
};

// Without a configuration for the layer (`configured` false) both run in
// bulk; with one, those whose method is bulk.
BulkBackward bulk_backward(bool configured, const OverlapChoice& dgrad, const OverlapChoice& wgrad);

struct DgradBesideWgrad {
  Schedule schedule = Schedule::plain;  // the dgrad's: plain, gemm_all_reduce, gemm_reduce_scatter
  comm::ProcessGroup* group = nullptr;
  BulkBackward bulk{};
  OverlapChoice dgrad_overlap{};  // the dgrad's method when it is not bulk
  bool regather = false;          // an input re-gather is in flight during the dgrad GEMM
  int comm_cores = 0;             // threads a GEMM leaves to a collective beside it
  const char* name = "";          // the dgrad GEMM, for messages ("qkv_dgrad")
  const QuantizedOperands* quantized = nullptr;  // native quantized dgrad operands (schedule.h)
  kernels::GemmOptions options{};  // the dgrad GEMM's (an epilogue: plain schedule only)
};

// dx = dy · w under `call.schedule` with its collective left in flight (bulk),
// then `wgrad(gemm_context)`: the weight-gradient work, whose GEMM runs on
// `gemm_context` (fewer threads while a collective is in flight beside it);
// then waits (on `ec`) for the dgrad's collective.
void dgrad_beside_wgrad(const ExecContext& ec, const DgradBesideWgrad& call, const Tensor& dy,
                        const Tensor& w, const Tensor& dx, GemmWorkspace& ws,
                        const std::function<void(const ExecContext& gemm_context)>& wgrad);

}  // namespace weft::parallel::overlap
