// Activation recomputation: memory for compute, Megatron's two modes.
//
//   none       every module keeps what its backward reads.
//   selective  the attention core (MultiheadAttention): the forward keeps
//              its inputs (the rotated qkv) and each row's log-sum-exp, and
//              drops what the attention kernel saves beyond them -- its
//              output, which proj also reads, and on the CPU the
//              probabilities of short sequences; the backward runs the
//              attention kernel again first. The dropout decisions are the
//              counter-based stream's at the saved (seed, offset): replayed.
//   full       TransformerLayer: the forward keeps the layer's input and the
//              random streams' state, and drops everything its sub-modules
//              saved; the backward sets the streams back, reruns the layer's
//              forward (pass marked recomputing()), restores the streams and
//              runs the backward. Weight sources are asked again: a GTP
//              weight is gathered again (the prefetch chain records the
//              recomputing forward's gathers in the backward's order).
//
// Both give results bitwise equal to none: the same kernels run on the same
// inputs with the same dropout draws, and a recomputing forward records no
// amax (fp8-delayed's scales stay those of the step). Gpt applies the mode
// to its first `recompute_layers` layers (0: all).
#pragma once

#include <string>

namespace weft::nn {

enum class Recompute { none, selective, full };

const char* recompute_name(Recompute r);  // "none", "selective", "full"
// Throws weft::Error naming the accepted modes.
Recompute parse_recompute(const std::string& name);

}  // namespace weft::nn
