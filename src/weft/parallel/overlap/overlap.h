// The comm-GEMM overlap algorithms, written once against ProcessGroup/Work,
// the execution context and the kernels (the CUDA backend runs the same
// schedule on streams). Collectives run along dimension 0 (rows: tokens in the
// residual-stream layout); `a` and `out` are row blocks, `b` the weight as the
// GEMM reads it (options.trans_b).
//
// Fork/join: every transfer is issued after the point where its buffer was
// last written and waited for before the function returns; no buffer is
// written while a transfer may still read it.
#pragma once

#include "weft/comm/process_group.h"
#include "weft/core/exec_context.h"
#include "weft/kernels/gemm.h"
#include "weft/parallel/workspace.h"

namespace weft::parallel::overlap {

// The context a GEMM runs on while a collective is in flight beside it: `ec`
// with comm_cores fewer threads (at least one); `ec` itself for 0 and on a GPU.
ExecContext beside_comm(const ExecContext& ec, int comm_cores);

// Ring-exchange all-gather + GEMM. a: this rank's rows (n, ...); gathered:
// (P·n, ...) receives every rank's rows (contiguous, rank r's at block r, kept
// for a wgrad GEMM); out: (P·n, N) = gathered · op(b) [+ bias]. P steps: at
// step i the GEMM runs on the block present while it travels on to the next
// rank and the following block arrives from the previous one (send_recv).
void ring_all_gather_gemm(const ExecContext& ec, comm::ProcessGroup& g, const Tensor& a,
                          const Tensor& b, const Tensor& out, const kernels::GemmOptions& opt,
                          const Tensor& gathered);

// Ring-exchange GEMM + reduce-scatter. a: every rank's rows (P·n, ...) with
// this rank's share of the features; out: (n, N) = this rank's block of
// Σ_ranks a · op(b) (no bias: the caller adds it after the reduction). At
// step i the partial product of block (r - 1 - i) mod P is added to the
// partial received from the previous rank and passed on; the GEMM of the next
// step runs while it travels. Two accumulators alternate (ws.partial).
void ring_gemm_reduce_scatter(const ExecContext& ec, comm::ProcessGroup& g, const Tensor& a,
                              const Tensor& b, const Tensor& out, const kernels::GemmOptions& opt,
                              GemmWorkspace& ws);

// Pipelined GEMM + reduce-scatter (or all-reduce): the rows of each rank's
// block split into `splits` chunks (uneven sizes allowed); chunk j's
// collective runs while chunk j+1 multiplies. reduce_scatter: a (P·n, ...) ->
// out (n, N); otherwise a (n, ...) -> out (n, N) all-reduced. No bias.
void pipelined_gemm_collective(const ExecContext& ec, comm::ProcessGroup& g, bool reduce_scatter,
                               const Tensor& a, const Tensor& b, const Tensor& out,
                               const kernels::GemmOptions& opt, int splits, GemmWorkspace& ws);

}  // namespace weft::parallel::overlap
