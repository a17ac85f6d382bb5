// The mappings between tensor-parallel regions: each a forward and its dual
// backward, the math core of tensor and sequence parallelism (Megatron).
//
// | mapping              | forward              | backward             |
// |----------------------|----------------------|----------------------|
// | copy_to_tp           | identity             | all-reduce           |
// | reduce_from_tp       | all-reduce           | identity             |
// | scatter_to_tp        | keep own slice (last)| all-gather (last)    |
// | gather_from_tp       | all-gather (last)    | keep own slice (last)|
// | scatter_to_sp        | keep own slice (sp)  | all-gather (sp)      |
// | gather_from_sp       | all-gather (sp)      | reduce-scatter (sp)  |
// | reduce_scatter_to_sp | reduce-scatter (sp)  | all-gather (sp)      |
// | sp_to_tp             | all-to-all           | all-to-all (dual)    |
//
// "last" is the last dimension (the hidden/feature axis a TP layer splits);
// "sp" is the dimension sequence parallelism splits: 0 in the residual-stream
// layout (see context.h: a rank's tokens are one contiguous block of rows),
// where gathers and reduce-scatters run on the tensors themselves; any other
// dimension is supported through a staging copy. sp_to_tp takes this rank's
// tokens with all features to every token with this rank's features
// (gather_from_sp followed by scatter_to_tp, as one all-to-all).
// A null group or a group of one rank makes every mapping the identity.
// Results are new tensors unless the mapping is the identity, except that
// scatter_to_sp along dimension 0 returns a view of the input's rows; the
// input is never modified.
#pragma once

#include "weft/comm/process_group.h"
#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"

namespace weft::parallel {

enum class Mapping {
  copy_to_tp,
  reduce_from_tp,
  scatter_to_tp,
  gather_from_tp,
  scatter_to_sp,
  gather_from_sp,
  reduce_scatter_to_sp,
  sp_to_tp,
};

// On `ec`: the collectives are waited for on it and the permutations that
// dimensions other than 0 need run as kernels on it.
Tensor forward(const ExecContext& ec, Mapping m, comm::ProcessGroup* group, const Tensor& x,
               int sp_dim = 0);
Tensor backward(const ExecContext& ec, Mapping m, comm::ProcessGroup* group, const Tensor& dy,
                int sp_dim = 0);

// The asynchronous forms of the row collectives (dimension 0) that mappings
// and schedules are made of, writing into a buffer reused across calls (keep
// one per call site: steady state allocates nothing; the buffer is replaced
// when someone still holds the previous result). The Work is in flight when
// they return: read the tensor only after waiting on it.
struct Pending {
  Tensor tensor;
  comm::Work work;
  // Waits (on `ec`) and returns the tensor.
  Tensor get(const ExecContext& ec = ExecContext::host()) const;
};
// x (n, ...) -> (n·size, ...): rank r's rows at block r.
Pending all_gather_rows(const ExecContext& ec, comm::ProcessGroup* group, const Tensor& x,
                        Tensor& buffer);
// x (n, ...) -> (n/size, ...): the sum over ranks of this rank's block of rows.
Pending reduce_scatter_rows(const ExecContext& ec, comm::ProcessGroup* group, const Tensor& x,
                            Tensor& buffer);

// The building blocks, usable on their own, on `ec` as forward/backward. `dim`
// may be any dimension; when it is not 0 the data is permuted through a
// staging buffer (kernels::transpose01 of the tensor viewed as (outer, parts,
// inner)).
// x -> slice `index` of `parts` equal slices along dim (a copy; for dim != 0
// a view of the staged copy of every slice, which lives as long as it does)
Tensor slice_along(const ExecContext& ec, const Tensor& x, int dim, int parts, int index);
// x (.., n, ..) -> (.., n·size, ..): rank r's block at position r
Tensor all_gather_along(const ExecContext& ec, comm::ProcessGroup& g, const Tensor& x, int dim);
// x (.., n, ..) -> (.., n/size, ..): the sum over ranks of this rank's block
Tensor reduce_scatter_along(const ExecContext& ec, comm::ProcessGroup& g, const Tensor& x, int dim);
// x -> the sum over ranks (a new tensor)
Tensor all_reduce_sum(const ExecContext& ec, comm::ProcessGroup& g, const Tensor& x);

}  // namespace weft::parallel
