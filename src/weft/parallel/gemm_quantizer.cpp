#include "weft/parallel/gemm_quantizer.h"

#include <cfloat>
#include <cmath>
#include <cstdlib>

#include "weft/core/cuda.h"
#include "weft/kernels/cast.h"
#include "weft/kernels/random.h"
#include "weft/parallel/context.h"
#include "weft/parallel/scaling.h"

namespace weft::parallel {

namespace {

constexpr const char* kOperandNames[] = {"input", "weight", "grad_output"};

size_t index(GemmQuantizer::Operand which, bool columnwise) {
  return static_cast<size_t>(which) * 2 + (columnwise ? 1 : 0);
}

// A 64-bit mix of a few words (splitmix64's finalizer over a running sum).
uint64_t mix(uint64_t a, uint64_t b, uint64_t c = 0) {
  uint64_t z = a + 0x9e3779b97f4a7c15ull * (b + 1) + 0xbf58476d1ce4e5b9ull * (c + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Quantizes the Hadamard-transformed (cols, rows) tensor `rht` into q's
// column-wise copy, q describing a (rows, cols) tensor with no row-wise copy.
void quantize_transposed(const ExecContext& ec, const Tensor& rht,
                         const kernels::QuantizeConfig& cfg, int64_t rows, int64_t cols,
                         QuantizedTensor& q) {
  QuantizedTensor t;
  t.data = q.col_data;
  t.scale_inv = q.col_scale_inv;
  kernels::quantize(ec, rht, cfg, t);
  q.mode = t.mode;
  q.dtype = t.dtype;
  q.rows = rows;
  q.cols = cols;
  q.data = Tensor();
  q.scale_inv = Tensor();
  q.col_data = t.data;
  q.col_scale_inv = t.scale_inv;
  q.tensor_scale_inv = t.tensor_scale_inv;
  q.amax = t.amax;
}

}  // namespace

QuantizedGemmPath quantized_gemm_path(Device device, Recipe recipe, QuantizedGemm mode) {
  const bool per_tensor = recipe == Recipe::fp8_delayed || recipe == Recipe::fp8_current;
  std::string forced;
  if (mode == QuantizedGemm::automatic) {
    const char* env = std::getenv("WEFT_FP8_GEMM");
    const std::string e = env ? env : "";
    WEFT_CHECK(e.empty() || e == "emulate" || e == "native",
               "WEFT_FP8_GEMM is '{}': set it to emulate (dequantized f32 GEMMs) or native "
               "(FP8 GEMMs on the quantized operands), or unset it",
               e);
    if (!e.empty()) {
      mode = e == "emulate" ? QuantizedGemm::emulate : QuantizedGemm::native;
      forced = " (WEFT_FP8_GEMM=" + e + ")";
    }
  }
  const std::string emulated = "emulated: operands quantized, dequantized to f32, f32 GEMMs";
  if (!per_tensor) {
    return {false, emulated + " (" + recipe_name(recipe) +
                       " has no native block-scaled GEMM in weft yet)"};
  }
  if (mode == QuantizedGemm::emulate) return {false, emulated + (forced.empty() ? "" : forced)};
  const int cc = device.is_cuda() ? cuda::compute_capability(device.index) : 0;
  // Where a Linear's GEMM cannot be native the text says so: MoE experts,
  // GTP-sharded weights, sequence parallelism's gathering GEMMs, ring and
  // pipeline overlap, and shapes cuBLASLt's FP8 kernels refuse
  // (kernels::quantized_gemm_is_native) multiply dequantized operands.
  const std::string native =
      device.is_cuda() ? "native: cuBLASLt FP8 GEMMs on the quantized operands in the Linear "
                         "layers (MoE experts, GTP-sharded weights, sequence parallelism's "
                         "gathering GEMMs, ring/pipeline overlap and shapes cuBLASLt's FP8 "
                         "kernels refuse emulate)"
                       : "native: kernels::quantized_gemm on the quantized operands (on the CPU "
                         "the emulation itself)";
  if (!device.is_cuda()) {
    if (mode == QuantizedGemm::native) return {true, native + forced};
    return {false, emulated + " (the CPU has no FP8 arithmetic)"};
  }
  if (cc < 89) {
    const std::string why = format(" (sm_{} has no FP8 tensor cores: 8.9 or newer)", cc);
    // Forced native still calls quantized_gemm, which emulates there.
    return {mode == QuantizedGemm::native, emulated + why + forced};
  }
  return {true, native + forced};
}

GemmQuantizer::GemmQuantizer(const ParallelContext& pc, const std::string& name,
                             comm::ProcessGroup* group)
    : pc_(pc), precision_(pc.precision), registry_(*pc.scaling), group_(group) {
  WEFT_CHECK(precision_.quantized(),
             "{}: a GemmQuantizer under the {} recipe, which quantizes "
             "nothing",
             name, recipe_name(precision_.recipe));
  native_ = quantized_gemm_path(pc.exec.device(), precision_.recipe, pc.quantized_gemm).native;
  if (precision_.recipe == Recipe::fp8_delayed) {
    for (int i = 0; i < 3; ++i) {
      const bool grad = i == 2;
      const DType t =
          grad && precision_.fp8_format == Fp8Format::hybrid ? DType::e5m2 : DType::e4m3;
      ids_[static_cast<size_t>(i)] =
          registry_.add(name + "." + kOperandNames[i], dtype_max(t), precision_.amax_history);
    }
  }
}

bool GemmQuantizer::columnwise_differs() const {
  return precision_.recipe == Recipe::mxfp8 || precision_.recipe == Recipe::nvfp4 ||
         precision_.recipe == Recipe::fp8_block;
}

QuantizedTensor& GemmQuantizer::slot(Operand which, bool columnwise) {
  return pc_.workspace->quantize.quantized[index(which, columnwise)];
}

float GemmQuantizer::reduced_amax(float amax, comm::ProcessGroup* shard_group) const {
  for (comm::ProcessGroup* g : {shard_group, group_}) {
    if (!g || g->size() == 1) continue;
    Tensor t = Tensor::from({1}, std::vector<float>{amax});
    g->all_reduce(t, comm::ReduceOp::max).wait();
    amax = t.item(0);
  }
  return amax;
}

const QuantizedTensor& GemmQuantizer::quantized(Operand which, const Tensor& x, bool columnwise,
                                                const PassContext& pass,
                                                comm::ProcessGroup* shard_group) {
  const ExecContext& ec = pc_.exec;
  const bool grad = which == Operand::grad_output;
  const DType fp8 = grad && precision_.fp8_format == Fp8Format::hybrid ? DType::e5m2 : DType::e4m3;
  kernels::QuantizeConfig cfg;
  cfg.rowwise = true;
  switch (precision_.recipe) {
    case Recipe::fp8_delayed:
    case Recipe::fp8_current:
      // One scale for both directions: the row-wise data serves both.
      return per_tensor(which, x, false, pass, shard_group);
    case Recipe::mxfp8: {
      QuantizedTensor& q = slot(which, columnwise);
      cfg.mode = ScalingMode::block_1x32;
      cfg.dtype = DType::e4m3;
      cfg.rowwise = !columnwise;
      cfg.columnwise = columnwise;
      cfg.want_amax = false;  // block scales need no tensor amax
      kernels::quantize(ec, x, cfg, q);
      return q;
    }
    case Recipe::fp8_block: {
      // 128x128 weight tiles serve both directions: one copy, row-wise.
      const bool weight = which == Operand::weight;
      if (weight) columnwise = false;
      QuantizedTensor& q = slot(which, columnwise);
      cfg.mode = weight ? ScalingMode::block_128x128 : ScalingMode::block_1x128;
      cfg.dtype = fp8;
      cfg.rowwise = !columnwise;
      cfg.columnwise = columnwise;
      cfg.want_amax = false;  // block scales need no tensor amax
      kernels::quantize(ec, x, cfg, q);
      return q;
    }
    case Recipe::nvfp4: return quantized_nvfp4(which, x, columnwise, shard_group);
    case Recipe::f32:
    case Recipe::bf16: break;
  }
  WEFT_FAIL("the {} recipe quantizes nothing", recipe_name(precision_.recipe));
}

const QuantizedTensor& GemmQuantizer::per_tensor(Operand which, const Tensor& x, bool transposed,
                                                 const PassContext& pass,
                                                 comm::ProcessGroup* shard_group) {
  const ExecContext& ec = pc_.exec;
  const bool grad = which == Operand::grad_output;
  kernels::QuantizeConfig cfg;
  cfg.dtype = grad && precision_.fp8_format == Fp8Format::hybrid ? DType::e5m2 : DType::e4m3;
  cfg.rowwise = !transposed;
  cfg.columnwise = transposed;
  QuantizedTensor& q = slot(which, transposed);
  if (precision_.recipe == Recipe::fp8_delayed) {
    const int id = ids_[static_cast<size_t>(which)];
    cfg.scale = registry_.state(id).scale;
    // Training passes record the amax into the registry's accumulator on
    // the device, without a host read (end_step folds it). Not reduced over
    // TP or a shard's group here: the registry reduces every amax over its
    // group once per step.
    // Evaluation records nothing: no amax is read back either.
    cfg.want_amax = !ec.device().is_cuda();  // the CPU has it anyway (GTP's shards keep it)
    if (pass.training() && !pass.recomputing()) {
      cfg.amax_accumulator = registry_.amax_accumulator(ec.device());
      cfg.amax_slot = id;
    }
    kernels::quantize(ec, x, cfg, q);
    return q;
  }
  const float local = kernels::amax(ec, x);
  const float amax = reduced_amax(local, shard_group);
  cfg.scale = scale_from_amax(amax, dtype_max(cfg.dtype), 0, 1.0f);
  cfg.want_amax = false;  // known already (a GPU would read it back again)
  kernels::quantize(ec, x, cfg, q);
  q.amax = local;
  return q;
}

const QuantizedTensor& GemmQuantizer::native(Operand which, const Tensor& x, bool columnwise,
                                             const PassContext& pass) {
  const bool per_tensor_recipe =
      precision_.recipe == Recipe::fp8_delayed || precision_.recipe == Recipe::fp8_current;
  if (per_tensor_recipe && columnwise) return per_tensor(which, x, true, pass, nullptr);
  return quantized(which, x, columnwise, pass);
}

const QuantizedTensor& GemmQuantizer::quantized_nvfp4(Operand which, const Tensor& x,
                                                      bool columnwise,
                                                      comm::ProcessGroup* shard_group) {
  const ExecContext& ec = pc_.exec;
  const bool weight = which == Operand::weight;
  kernels::QuantizeConfig cfg;
  cfg.rowwise = true;
  cfg.mode = weight ? ScalingMode::block_16x16 : ScalingMode::block_1x16;
  cfg.dtype = DType::e2m1;
  if (weight) columnwise = false;  // 16x16 tiles: one copy serves both
  QuantizedTensor& q = slot(which, columnwise);
  if (which == Operand::grad_output && precision_.stochastic_rounding) {
    cfg.stochastic = true;
    cfg.seed = mix(pc_.seed, registry_.steps(), registry_.next_stream());
  }
  const int64_t cols = x.shape().last(), rows = x.numel() / std::max<int64_t>(cols, 1);
  if (columnwise && precision_.hadamard && rows % 16 == 0) {
    // wgrad: the Hadamard transform along the tokens, fused with the
    // transpose; its rows are the column-wise copy's.
    const auto signs = static_cast<uint16_t>(mix(pc_.seed, registry_.steps(), 0x5248ull));
    const Tensor xf = x.dtype() == DType::f32 ? x : x.to(DType::f32);
    Tensor rht = ec.reuse(pc_.workspace->quantize.hadamard, {cols, rows}, DType::f32);
    kernels::hadamard16_transpose(ec, xf, signs, rht);
    cfg.global_amax = reduced_amax(kernels::amax(ec, rht));
    quantize_transposed(ec, rht, cfg, rows, cols, q);
    return q;
  }
  cfg.global_amax = reduced_amax(kernels::amax(ec, x), shard_group);
  cfg.rowwise = !columnwise;
  cfg.columnwise = columnwise;
  kernels::quantize(ec, x, cfg, q);
  return q;
}

bool GemmQuantizer::weight_columnwise_differs() const { return precision_.recipe == Recipe::mxfp8; }

float GemmQuantizer::weight_key() const {
  if (precision_.recipe != Recipe::fp8_delayed) return 0.0f;
  return registry_.state(ids_[static_cast<size_t>(Operand::weight)]).scale;
}

void GemmQuantizer::record_weight_amax(float amax, const PassContext& pass) {
  if (precision_.recipe == Recipe::fp8_delayed && pass.training() && !pass.recomputing()) {
    registry_.record(ids_[static_cast<size_t>(Operand::weight)], amax);
  }
}

Tensor GemmQuantizer::weight_operand_buffer(bool columnwise, const Shape& shape) {
  return pc_.exec.reuse(pc_.workspace->quantize.dequantized[index(Operand::weight, columnwise)],
                        shape, DType::f32, MemoryTag::weight_cache);
}

Tensor GemmQuantizer::operand(Operand which, const Tensor& x, bool columnwise, PassContext& pass) {
  const QuantizedTensor& q = quantized(which, x, columnwise, pass);
  const bool col = q.has_columnwise() && (columnwise || !q.has_rowwise());
  Tensor out = pc_.exec.reuse(pc_.workspace->quantize.dequantized[index(which, columnwise)],
                              x.shape(), DType::f32, MemoryTag::activations);
  kernels::dequantize(pc_.exec, q, col, out);
  return out;
}

Tensor GemmQuantizer::operand_of(const QuantizedTensor& q, bool columnwise) const {
  Tensor out = pc_.exec.empty({q.rows, q.cols}, DType::f32, MemoryTag::activations);
  kernels::dequantize(pc_.exec, q, q.has_columnwise() && (columnwise || !q.has_rowwise()), out);
  return out;
}

}  // namespace weft::parallel
