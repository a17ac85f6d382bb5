#include "weft/parallel/gtp/quantized_gather.h"

#include <cstring>
#include <vector>

namespace weft::parallel::gtp {

int64_t quantized_row_alignment(Recipe recipe) {
  switch (recipe) {
    case Recipe::mxfp8: return 32;
    case Recipe::nvfp4: return 16;
    default: return 1;
  }
}

namespace {

// The (cols, rows) column-wise tensor of the whole weight from the gathered
// (N · cols, S) column-wise shards (one byte per element), cut to `rows`.
Tensor interleave(const Tensor& gathered, int64_t n, int64_t cols, int64_t rows) {
  const int64_t s = gathered.size(1);
  Tensor out = Tensor::empty({cols, rows}, gathered.dtype());
  const auto* src = static_cast<const uint8_t*>(gathered.raw());
  auto* dst = static_cast<uint8_t*>(out.raw());
  for (int64_t r = 0; r < n; ++r) {
    const int64_t start = r * s;
    const int64_t len = std::min(s, rows - start);
    if (len <= 0) break;
    for (int64_t c = 0; c < cols; ++c) {
      std::memcpy(dst + c * rows + start, src + (r * cols + c) * s, static_cast<size_t>(len));
    }
  }
  return out;
}

// Gathers every `ins[i]` of each rank into `outs[i]` (rank r's at r · its
// bytes). Data and scales differ in dtype: packed as bytes into one buffer,
// one all-gather (a backend's coalesced call takes one dtype).
void gather_packed(comm::ProcessGroup& group, const std::vector<Tensor>& ins,
                   std::vector<Tensor>& outs) {
  const int64_t n = group.size();
  int64_t per_rank = 0;
  for (const Tensor& t : ins) per_rank += t.nbytes();
  Tensor packed = Tensor::empty({per_rank}, DType::u8);
  Tensor all = Tensor::empty({per_rank * n}, DType::u8);
  auto* p = static_cast<uint8_t*>(packed.raw());
  for (const Tensor& t : ins) {
    std::memcpy(p, t.raw(), static_cast<size_t>(t.nbytes()));
    p += t.nbytes();
  }
  group.all_gather(all, packed).wait();
  const auto* src = static_cast<const uint8_t*>(all.raw());
  int64_t offset = 0;
  for (size_t i = 0; i < ins.size(); ++i) {
    const int64_t b = ins[i].nbytes();
    auto* dst = static_cast<uint8_t*>(outs[i].raw());
    for (int64_t r = 0; r < n; ++r) {
      std::memcpy(dst + r * b, src + r * per_rank + offset, static_cast<size_t>(b));
    }
    offset += b;
  }
}

// The parts of `s` that differ between ranks: the data of the copy it has
// and that copy's block scales.
std::vector<Tensor> rank_parts(const QuantizedTensor& s) {
  if (!s.has_rowwise()) return {s.col_data, s.col_scale_inv};
  if (s.mode != ScalingMode::tensor) return {s.data, s.scale_inv};
  return {s.data};
}

}  // namespace

QuantizedGather gather_quantized(GemmQuantizer& quantizer, comm::ProcessGroup& group,
                                 const Tensor& shard, int64_t rows, bool columnwise,
                                 PassContext& pass) {
  using Op = GemmQuantizer::Operand;
  // The packing moves bytes through host pointers.
  WEFT_CHECK(shard.device().is_cpu(),
             "a quantized GTP weight gather runs on the CPU only; the shard of group '{}' is on {}",
             group.name(), shard.device());
  const QuantizedTensor& s = quantizer.quantized(Op::weight, shard, columnwise, pass, &group);
  const int64_t n = group.size(), sr = shard.size(0), cols = shard.shape().last();
  const int64_t block_rows =
      std::max<int64_t>(scaling_block_rows(s.mode),
                        s.has_columnwise() && !s.has_rowwise() ? scaling_block_cols(s.mode) : 1);
  WEFT_CHECK(sr % block_rows == 0,
             "a quantized GTP gather needs shards of a multiple of {} rows ({} blocks), got {}",
             block_rows, scaling_mode_name(s.mode), sr);
  QuantizedGather out;
  QuantizedTensor& w = out.weight;
  w.mode = s.mode;
  w.dtype = s.dtype;
  w.rows = rows;
  w.cols = cols;
  w.tensor_scale_inv = s.tensor_scale_inv;
  w.amax = s.amax;
  out.elements = sr * cols;
  const std::vector<Tensor> ins = rank_parts(s);
  std::vector<Tensor> outs;
  for (const Tensor& in : ins) {
    Shape shape = in.shape();
    shape[0] *= n;
    outs.push_back(Tensor::empty(shape, in.dtype()));
    out.bytes_sent += in.nbytes();
  }
  // Per-tensor scales are the same on every rank (the amax was reduced):
  // they travel with no data, but count as moved, as a GPU would send them.
  if (s.mode == ScalingMode::tensor || s.mode == ScalingMode::block_16x16 ||
      s.mode == ScalingMode::block_1x16) {
    out.bytes_sent += static_cast<int64_t>(sizeof(float));
  }
  gather_packed(group, ins, outs);
  const bool blocks = s.mode != ScalingMode::tensor;
  if (s.has_rowwise()) {
    w.data = outs[0].narrow(0, rows);
    w.scale_inv =
        blocks ? outs[1].narrow(0, scale_shape(s.mode, rows, cols)[0]) : s.scale_inv.clone();
  } else {
    WEFT_CHECK(dtype_bits(s.dtype) == 8 && dtype_bits(s.col_scale_inv.dtype()) == 8,
               "a gathered column-wise copy needs one-byte data and scales");
    w.col_data = interleave(outs[0], n, cols, rows);
    w.col_scale_inv = interleave(outs[1], n, cols, scale_shape(s.mode, cols, rows)[1]);
  }
  return out;
}

}  // namespace weft::parallel::gtp
