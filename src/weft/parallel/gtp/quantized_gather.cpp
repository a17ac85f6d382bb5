#include "weft/parallel/gtp/quantized_gather.h"

#include <cstring>

#include "weft/kernels/cast.h"

namespace weft::parallel::gtp {

int64_t quantized_row_alignment(Recipe recipe) {
  switch (recipe) {
    case Recipe::fp8_block: return 128;
    case Recipe::mxfp8: return 32;
    case Recipe::nvfp4: return 16;
    default: return 1;
  }
}

bool QuantizedShard::update(GemmQuantizer& quantizer, comm::ProcessGroup& group,
                            const Tensor& shard, uint64_t version, bool columnwise,
                            const PassContext& pass) {
  const float key = quantizer.weight_key();
  const bool current = defined() && version == version_ && key == key_ &&
                       (pass.serial() == serial_ || pass.reuse_weight_casts());
  serial_ = pass.serial();
  if (current) {
    quantizer.record_weight_amax(meta_.amax, pass);
    return false;
  }
  // The packing moves bytes through host pointers.
  WEFT_CHECK(shard.device().is_cpu(),
             "a quantized GTP weight gather runs on the CPU only; the shard of group '{}' is on {}",
             group.name(), shard.device());
  const QuantizedTensor& q =
      quantizer.quantized(GemmQuantizer::Operand::weight, shard, columnwise, pass, &group);
  // NVFP4's 16x16 weight tiles serve both directions: the quantizer makes the
  // row-wise copy whichever was asked for.
  columnwise_ = !q.has_rowwise();
  const Tensor& data = columnwise_ ? q.col_data : q.data;
  const Tensor& scales = columnwise_ ? q.col_scale_inv : q.scale_inv;
  const bool blocks = q.mode != ScalingMode::tensor;
  const int64_t block_rows = columnwise_ ? scaling_block_cols(q.mode) : scaling_block_rows(q.mode);
  WEFT_CHECK(shard.size(0) % block_rows == 0,
             "a quantized GTP gather needs shards of a multiple of {} rows ({} blocks), got {}",
             block_rows, scaling_mode_name(q.mode), shard.size(0));
  const int64_t bytes = data.nbytes() + (blocks ? scales.nbytes() : 0);
  if (!packed_.defined() || packed_.nbytes() != bytes) {
    packed_ = Tensor::empty({bytes}, DType::u8, Device::cpu(), MemoryTag::weight_cache);
  }
  auto* p = static_cast<uint8_t*>(packed_.raw());
  std::memcpy(p, data.raw(), static_cast<size_t>(data.nbytes()));
  if (blocks) std::memcpy(p + data.nbytes(), scales.raw(), static_cast<size_t>(scales.nbytes()));
  meta_ = QuantizedTensor();
  meta_.mode = q.mode;
  meta_.dtype = q.dtype;
  meta_.rows = q.rows;
  meta_.cols = q.cols;
  meta_.tensor_scale_inv = q.tensor_scale_inv;
  meta_.amax = q.amax;
  data_shape_ = data.shape();
  data_bytes_ = data.nbytes();
  scale_shape_ = scales.shape();
  scale_dtype_ = scales.dtype();
  tensor_scale_ = Tensor::full({1}, q.tensor_scale_inv);
  version_ = version;
  key_ = key;
  ++quantizations_;
  return true;
}

int64_t QuantizedShard::bytes_moved() const {
  if (!defined()) return 0;
  const bool tensor_scale = meta_.mode == ScalingMode::tensor ||
                            meta_.mode == ScalingMode::block_1x16 ||
                            meta_.mode == ScalingMode::block_16x16;
  return packed_.nbytes() + (tensor_scale ? static_cast<int64_t>(sizeof(float)) : 0);
}

QuantizedTensor QuantizedShard::part(const Tensor& packed, int64_t r) const {
  const int64_t offset = r * packed_.nbytes();
  QuantizedTensor q = meta_;
  Tensor data = packed.view_as(meta_.dtype, data_shape_, offset);
  Tensor scales = meta_.mode == ScalingMode::tensor
                      ? tensor_scale_
                      : packed.view_as(scale_dtype_, scale_shape_, offset + data_bytes_);
  (columnwise_ ? q.col_data : q.data) = std::move(data);
  (columnwise_ ? q.col_scale_inv : q.scale_inv) = std::move(scales);
  return q;
}

void QuantizedShard::dequantize(const ExecContext& ec, const Tensor& gathered, int64_t rows,
                                Tensor& out) const {
  WEFT_CHECK(defined(), "a quantized GTP shard decoded before it was quantized");
  const int64_t n = gathered.nbytes() / packed_.nbytes(), s = meta_.rows;
  WEFT_CHECK(gathered.nbytes() == n * packed_.nbytes() && out.numel() == n * s * meta_.cols,
             "a gathered quantized weight of {} bytes does not hold {}-byte shards of {} x {}",
             gathered.nbytes(), packed_.nbytes(), s, meta_.cols);
  const Tensor all = out.reshape({n * s, meta_.cols});
  for (int64_t r = 0; r < n && r * s < rows; ++r) {
    Tensor rows_of_r = all.narrow(r * s, s);
    kernels::dequantize(ec, part(gathered, r), columnwise_, rows_of_r);
  }
}

}  // namespace weft::parallel::gtp
