// Workspace: the scratch buffers of one rank's model, shared by its modules
// (Megatron's global memory buffer). Gathered inputs, re-gathered inputs,
// unreduced partial sums and converted GEMM inputs live only within one
// module's call, so one buffer per role serves every layer: the transient
// memory is one activation per role per rank, not one per layer. Buffers grow
// to the largest request and are reused across layers and steps
// (ExecContext::reuse); a buffer someone still holds is never handed out.
// One Workspace per rank (a ParallelContext owns it); not thread-safe.
#pragma once

#include <array>

#include "weft/core/quantized.h"
#include "weft/core/tensor.h"

namespace weft::parallel {

// The buffers of a GEMM schedule (schedule.h).
struct GemmWorkspace {
  Tensor gathered;  // all_gather_gemm: the group's rows of the input
  Tensor partial;   // gemm_reduce_scatter: the unreduced product
};

// Roles that are never live at once share a buffer: the gathered rows of a
// forward input, of a row-parallel backward's output gradient, of a
// column-parallel backward's input (in flight during its dgrad GEMM, whose
// reduce-scatter uses `partial`) and of the embedding's gradient all use
// gemm.gathered.
// The quantized recipes' operands (gemm_quantizer.h), one slot per operand
// and direction: each lives only within its GEMM.
struct QuantizeWorkspace {
  std::array<QuantizedTensor, 6> quantized;
  std::array<Tensor, 6> dequantized;  // what the CPU's emulation multiplies
  Tensor hadamard;                    // NVFP4's transformed wgrad operand
};

struct Workspace {
  GemmWorkspace gemm;
  Tensor input_cast, grad_cast;  // activations converted to the GEMM input dtype
  QuantizeWorkspace quantize;
};

}  // namespace weft::parallel
