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
//
// "last" is the last dimension (the hidden/feature axis a TP layer splits);
// "sp" is the dimension sequence parallelism splits: 1 (the sequence of a
// (B, T, C) activation, Megatron) or 0 (the batch, "TP across DP ranks").
// A null group or a group of one rank makes every mapping the identity.
// Results are new tensors unless the mapping is the identity; the input is
// never modified.
#pragma once

#include "weft/comm/process_group.h"
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
};

Tensor forward(Mapping m, comm::ProcessGroup* group, const Tensor& x, int sp_dim = 1);
Tensor backward(Mapping m, comm::ProcessGroup* group, const Tensor& dy, int sp_dim = 1);

// The building blocks, usable on their own. `dim` may be any dimension; when
// it is not 0 the data is permuted through a staging buffer.
// x -> slice `index` of `parts` equal slices along dim (a copy)
Tensor slice_along(const Tensor& x, int dim, int parts, int index);
// x (.., n, ..) -> (.., n·size, ..): rank r's block at position r
Tensor all_gather_along(comm::ProcessGroup& g, const Tensor& x, int dim);
// x (.., n, ..) -> (.., n/size, ..): the sum over ranks of this rank's block
Tensor reduce_scatter_along(comm::ProcessGroup& g, const Tensor& x, int dim);
// x -> the sum over ranks (a new tensor)
Tensor all_reduce_sum(comm::ProcessGroup& g, const Tensor& x);

}  // namespace weft::parallel
