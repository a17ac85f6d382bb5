// GemmQuantizer: how one Linear's GEMM operands are quantized under the
// context's precision recipe (precision.h). The Linear calls it on each
// operand right before each of its three GEMMs:
//
//   fprop  y  = x · Wᵀ     input (row-wise),        weight (row-wise)
//   dgrad  dx = dy · W     grad_output (row-wise),  weight (column-wise)
//   wgrad  dW = dyᵀ · x    grad_output (column-wise), input (column-wise)
//
// Column-wise means quantized in blocks down the columns, the copy the
// backward GEMMs read (core/quantized.h). Per recipe:
//   fp8-delayed  per-tensor; E4M3, gradients E5M2 under HYBRID; the scale
//                from the tensor's amax history (ScalingRegistry), each
//                quantization recording its amax (training passes only).
//   fp8-current  per-tensor; scale fp8_max / amax of this tensor, the amax
//                reduced (max) over the Linear's TP group when it is split,
//                so that every rank quantizes its shard as the TP=1 run would.
//   fp8-block    1x128 blocks (E4M3, gradients E5M2 under HYBRID), 128x128
//                tiles for weights, power-of-two f32 scales; nothing to
//                reduce.
//   mxfp8        E4M3 1x32 blocks, E8M0 scales; nothing to reduce.
//   nvfp4        E2M1 1x16 blocks (16x16 for weights), E4M3 block scales,
//                an f32 per-tensor scale from the amax reduced over the TP
//                group; gradients stochastically rounded (streams from the
//                context's seed, the registry's step and a per-step counter);
//                the wgrad operands pass through the random Hadamard
//                transform along the tokens first when their count is a
//                multiple of 16 (signs drawn once per step, shared by all
//                layers, as TE does).
// Per-tensor, 16x16 and 128x128 scaling give both directions the same values.
//
// The quantized operands live in the context's Workspace (one slot per
// operand and direction, shared by every Linear): valid until the next call
// for the same operand and direction.
//
// operand() returns what the GEMM multiplies: on the CPU the quantized
// operand dequantized to f32 in the input's layout (exact emulation). A GPU
// backend takes quantized() instead and hands the data and scales to an FP8
// GEMM; a weight source that gathers quantized shards (GTP) calls
// quantized(Operand::weight, shard, ...) and gathers data and scales.
#pragma once

#include <array>
#include <string>

#include "weft/comm/process_group.h"
#include "weft/core/quantized.h"
#include "weft/parallel/pass.h"
#include "weft/parallel/precision.h"

namespace weft::parallel {

struct ParallelContext;
class ScalingRegistry;

// How `recipe`'s Linear GEMMs multiply on `device` under `mode` (precision.h):
// natively on the quantized operands, or on operands dequantized to f32 (the
// emulation), with the reason in words ("native: cuBLASLt FP8 GEMMs on the
// quantized operands", "emulated: ..."). GemmQuantizer::native_gemm is
// `native`; weft info, the training banner and bench step print `text`.
// Reads WEFT_FP8_GEMM under automatic (throws weft::Error on a bad value).
struct QuantizedGemmPath {
  bool native = false;
  std::string text;
};
QuantizedGemmPath quantized_gemm_path(Device device, Recipe recipe,
                                      QuantizedGemm mode = QuantizedGemm::automatic);

class GemmQuantizer {
 public:
  enum class Operand : uint8_t { input, weight, grad_output };

  // `name`: the Linear's ("h.0.attn.qkv"); `group`: the TP group the
  // Linear's tensors are split over (null when it is not split). Under
  // fp8-delayed registers input, weight and grad_output with the context's
  // registry.
  GemmQuantizer(const ParallelContext& pc, const std::string& name, comm::ProcessGroup* group);

  // x quantized for its GEMM (columnwise: the copy the backward reads).
  // `shard_group`: x is this rank's shard of the tensor over that group
  // (rows of a GTP weight): the amaxes that set current per-tensor scales
  // (fp8-current, NVFP4's second level) are reduced (max) over it as well as
  // over the TP group, so that every rank quantizes its shard with the scale
  // of the whole tensor, and the shards' quantized data concatenated equal
  // the whole tensor quantized (block scales too, when the shards align to
  // the blocks and the padding is zero). Delayed scaling records the shard's
  // own amax: the registry's end_step reduces it over a group that spans the
  // gtp group (the trainer's does), which makes it the whole weight's.
  const QuantizedTensor& quantized(Operand which, const Tensor& x, bool columnwise,
                                   const PassContext& pass,
                                   comm::ProcessGroup* shard_group = nullptr);
  // Whether this Linear's GEMMs multiply quantized operands
  // (kernels::quantized_gemm, with native() operands) rather than the
  // dequantized ones of operand(): ParallelContext::quantized_gemm decides
  // (precision.h); fixed when the quantizer is made. The block-scaled recipes
  // always emulate (their cuBLASLt GEMMs are not wired yet).
  bool native_gemm() const { return native_; }
  // x quantized as a native GEMM reads it: quantized() with, for columnwise,
  // the transposed copy that makes every GEMM "TN" (per-tensor scaling
  // transposes its codes into the column-wise copy, with the row-wise scale).
  const QuantizedTensor& native(Operand which, const Tensor& x, bool columnwise,
                                const PassContext& pass);

  // The same, dequantized to f32 in x's layout: what the CPU multiplies.
  Tensor operand(Operand which, const Tensor& x, bool columnwise, PassContext& pass);
  // What the CPU multiplies for a quantized tensor made elsewhere (kept
  // from an earlier quantized() call): its values in (q.rows, q.cols) f32 in
  // a new tensor, from the column-wise copy when asked for and present.
  Tensor operand_of(const QuantizedTensor& q, bool columnwise) const;

  // A weight quantized once and reused (GTP's quantized shards, once per
  // step): what its quantization depends on besides its values — delayed
  // scaling's current scale of the weight; 0 under the other recipes, whose
  // weight scales derive from the values. A cached quantization is current
  // while the values and this key are unchanged.
  float weight_key() const;
  // A training pass that reuses such a weight records its amax again
  // (delayed scaling: history[0] is a running max, so every pass recording
  // the same amax is what quantizing it every pass would record).
  void record_weight_amax(float amax, const PassContext& pass);
  // The f32 buffer (the context's Workspace slot of the weight operand in
  // this direction) a weight gathered in its quantized form is dequantized
  // into, for the CPU's GEMM: valid until the next weight operand of the
  // direction, as operand()'s.
  Tensor weight_operand_buffer(bool columnwise, const Shape& shape);

  // Whether a weight's column-wise copy can differ from its row-wise one
  // (MXFP8 only: NVFP4 and fp8-block quantize weights in 16x16 and 128x128
  // tiles, which serve both).
  bool weight_columnwise_differs() const;
  // Whether the column-wise copy can differ from the row-wise one (block
  // scaling along the other direction): then the backward quantizes the
  // high-precision tensors again.
  bool columnwise_differs() const;

 private:
  QuantizedTensor& slot(Operand which, bool columnwise);
  // Per-tensor scaling (fp8-delayed, fp8-current): the row-wise copy, or the
  // transposed one.
  const QuantizedTensor& per_tensor(Operand which, const Tensor& x, bool transposed,
                                    const PassContext& pass, comm::ProcessGroup* shard_group);
  float reduced_amax(float amax, comm::ProcessGroup* shard_group = nullptr) const;
  const QuantizedTensor& quantized_nvfp4(Operand which, const Tensor& x, bool columnwise,
                                         comm::ProcessGroup* shard_group);

  const ParallelContext& pc_;
  Precision precision_;
  ScalingRegistry& registry_;
  comm::ProcessGroup* group_;
  std::array<int, 3> ids_{-1, -1, -1};  // delayed scaling: the registry's tensor ids
  bool native_ = false;
};

}  // namespace weft::parallel
