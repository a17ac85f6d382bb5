// Token dispatch and combine of a Mixture-of-Experts block, over a Routing
// (nn/router.h): separate functions over explicit per-expert counts, so that
// expert parallelism can put an all_to_all of those counts and rows between
// dispatch and the experts, and between the experts and combine.
//
//   dispatch   x (N, C) -> xp (M, C): row i is token order[i] / k; rows are
//              grouped by expert, counts[e] rows for expert e (M kept slots)
//   combine    o (M, C) -> y (N, C): y_n = Σ over n's kept slots of gate · o;
//              a token whose every slot was dropped gets zeros
//
// Host loops in f32 (the tensors are copied to the host and back when they
// live elsewhere): they move M·C values, little beside the expert GEMMs.
#pragma once

#include <vector>

#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"
#include "weft/nn/router.h"

namespace weft::nn {

// x (N, C) -> xp (M, C) in x's dtype, on ec's device.
Tensor dispatch_tokens(const ExecContext& ec, const Tensor& x, const Routing& r);
// dxp (M, C) -> dx (N, C) in dxp's dtype: each token's slots' gradients summed.
Tensor dispatch_backward(const ExecContext& ec, const Tensor& dxp, const Routing& r);

// o (M, C) -> y (N, C) in `dtype`, on ec's device.
Tensor combine_tokens(const ExecContext& ec, const Tensor& o, const Routing& r, DType dtype);

struct CombineGrads {
  Tensor dexperts;           // (M, C) in dy's dtype: gate · dy of the slot's token
  std::vector<float> dgate;  // (N, k): <dy_n, o_slot>; 0 for a dropped slot
};
// dy (N, C), o (M, C) as combine read it -> the gradients of o and the gates.
CombineGrads combine_backward(const ExecContext& ec, const Tensor& dy, const Tensor& o,
                              const Routing& r);

}  // namespace weft::nn
