#include "weft/parallel/parameter.h"

#include <algorithm>
#include <cstring>

namespace weft::parallel {

int64_t ShardSpec::tp_rows() const {
  WEFT_CHECK(global_shape.rank() >= 1, "a tensor of shape {} has no rows", global_shape);
  if (split_dim != 0) return global_shape[0];
  const int64_t held = is_shared() ? dealt_blocks / shared + (blocks - dealt_blocks) : blocks;
  return held * length;
}

std::vector<int64_t> ShardSpec::held_blocks() const {
  std::vector<int64_t> out;
  for (int64_t b = is_shared() ? shared_rank : 0; b < (is_shared() ? dealt_blocks : 0);
       b += shared) {
    out.push_back(b);
  }
  for (int64_t b = is_shared() ? dealt_blocks : 0; b < blocks; ++b) out.push_back(b);
  return out;
}

ShardSpec ShardSpec::shared_slice() const {
  ShardSpec s = *this;
  s.shared = 1;
  s.shared_rank = 0;
  s.dealt_blocks = 0;
  return s;
}

ShardSpec ShardSpec::tp_level() const {
  ShardSpec s = *this;
  s.row_group.clear();
  s.row_offset = s.row_length = s.row_padding = 0;
  return s;
}

std::vector<std::string> replicated_groups(bool over_tp) {
  if (over_tp) return {"tp", "cp", "gtp", "ep", "dp"};
  return {"cp", "gtp", "ep", "dp"};
}

Parameter make_parameter(std::string name, const Tensor& value, ShardSpec spec, bool decay,
                         Device device) {
  WEFT_CHECK(value.dtype() == DType::f32, "parameter {} must be f32 (master weights), got {}", name,
             dtype_name(value.dtype()));
  Parameter p;
  p.name = std::move(name);
  {
    ScopedMemoryTag tag(MemoryTag::params);
    p.value = Tensor::empty(value.shape(), DType::f32, device);
    p.value.copy_from(value);
  }
  p.grad = Tensor::zeros(value.shape(), DType::f32, device, MemoryTag::grads);
  p.spec = std::move(spec);
  p.decay = decay;
  return p;
}

ShardSpec split_spec(const Shape& global, int dim, const std::string& group_name, int rank,
                     int group_size, int64_t blocks) {
  ShardSpec spec;
  spec.global_shape = global;
  spec.replicated_over = replicated_groups(false);
  if (group_size == 1) return spec;
  WEFT_CHECK(dim >= 0 && dim < global.rank(), "cannot split dimension {} of {}", dim, global);
  const int64_t extent = global[dim];
  WEFT_CHECK(extent % (blocks * group_size) == 0,
             "dimension {} of size {} cannot be split into {} x {} equal parts", dim, extent,
             blocks, group_size);
  spec.split_dim = dim;
  spec.split_group = group_name;
  spec.blocks = blocks;
  spec.length = extent / blocks / group_size;
  spec.offset = rank * spec.length;
  return spec;
}

ShardSpec shared_split_spec(const Shape& global, const std::string& group_name, int rank,
                            int group_size, int positions, int64_t blocks, int64_t dealt_blocks) {
  WEFT_CHECK(positions >= 1 && group_size % positions == 0 && rank >= 0 && rank < group_size,
             "cannot share a split of {} positions over rank {} of {}", positions, rank,
             group_size);
  const int shared = group_size / positions;
  WEFT_CHECK(global.rank() >= 1 && blocks >= 1 && global[0] % (blocks * positions) == 0,
             "dimension 0 of {} cannot be split into {} x {} equal parts", global, blocks,
             positions);
  WEFT_CHECK(dealt_blocks >= 0 && dealt_blocks <= blocks && dealt_blocks % shared == 0,
             "{} of {} blocks cannot be dealt among {} ranks", dealt_blocks, blocks, shared);
  ShardSpec spec;
  spec.global_shape = global;
  spec.replicated_over = replicated_groups(false);
  spec.split_dim = 0;
  spec.split_group = group_name;
  spec.blocks = blocks;
  spec.length = global[0] / blocks / positions;
  spec.offset = (rank % positions) * spec.length;
  if (shared > 1) {
    spec.shared = shared;
    spec.shared_rank = rank / positions;
    spec.dealt_blocks = dealt_blocks;
  }
  return spec;
}

Tensor held_part(const ShardSpec& spec, const Tensor& slice) {
  if (!spec.is_shared()) return slice;
  WEFT_CHECK(slice.dim() >= 1 && slice.size(0) == spec.blocks * spec.length,
             "held_part: a slice of {} rows, the shared slice has {}", slice.shape(),
             spec.blocks * spec.length);
  Shape s = slice.shape();
  s[0] = spec.tp_rows();
  Tensor out = Tensor::empty(s, slice.dtype(), slice.device());
  const std::vector<int64_t> held = spec.held_blocks();
  for (size_t i = 0; i < held.size(); ++i) {
    out.narrow(static_cast<int64_t>(i) * spec.length, spec.length)
        .copy_from(slice.narrow(held[i] * spec.length, spec.length));
  }
  return out;
}

Tensor joined_slice(const ShardSpec& spec, const Tensor& gathered) {
  if (!spec.is_shared()) return gathered;
  const int64_t rows = spec.tp_rows(), dealt = spec.dealt_blocks / spec.shared;
  WEFT_CHECK(gathered.dim() >= 1 && gathered.size(0) == spec.shared * rows,
             "joined_slice: {} gathered rows, {} ranks share {} rows each", gathered.shape(),
             spec.shared, rows);
  Shape s = gathered.shape();
  s[0] = spec.blocks * spec.length;
  Tensor out = Tensor::empty(s, gathered.dtype(), gathered.device());
  for (int64_t b = 0; b < spec.blocks; ++b) {
    // A dealt block from its rank, a common one from shared rank 0.
    const bool is_dealt = b < spec.dealt_blocks;
    const int64_t from = is_dealt ? b % spec.shared : 0;
    const int64_t index = is_dealt ? b / spec.shared : dealt + (b - spec.dealt_blocks);
    out.narrow(b * spec.length, spec.length)
        .copy_from(gathered.narrow(from * rows + index * spec.length, spec.length));
  }
  return out;
}

Tensor common_rows(const ShardSpec& spec, const Tensor& local) {
  if (!spec.is_shared() || spec.dealt_blocks == spec.blocks) return Tensor();
  WEFT_CHECK(local.dim() >= 1 && local.size(0) == spec.tp_rows(),
             "common_rows: a tensor of {} rows, the shared spec's has {}", local.shape(),
             spec.tp_rows());
  return local.narrow(spec.dealt_blocks / spec.shared * spec.length,
                      (spec.blocks - spec.dealt_blocks) * spec.length);
}

Tensor counted_part(const ShardSpec& spec, const Tensor& local) {
  if (!spec.is_shared() || spec.shared_rank == 0) return unpadded(spec, local);
  return local.narrow(0, spec.dealt_blocks / spec.shared * spec.length);
}

ShardSpec row_split_spec(ShardSpec spec, const std::string& group_name, int rank, int group_size,
                         int64_t alignment) {
  WEFT_CHECK(!spec.rows_split(), "the rows of this slice are already split over '{}'",
             spec.row_group);
  WEFT_CHECK(!spec.is_shared(),
             "the rows of a slice shared by {} ranks cannot be split over '{}' as well",
             spec.shared, group_name);
  WEFT_CHECK(group_size >= 1 && rank >= 0 && rank < group_size && alignment >= 1,
             "cannot split rows over rank {} of {} with alignment {}", rank, group_size, alignment);
  const int64_t rows = spec.tp_rows();
  const int64_t multiple = alignment * group_size;
  const int64_t shard = (rows + multiple - 1) / multiple * multiple / group_size;
  spec.row_group = group_name;
  spec.row_offset = rank * shard;
  spec.row_length = std::clamp<int64_t>(rows - spec.row_offset, 0, shard);
  spec.row_padding = shard - spec.row_length;
  std::erase(spec.replicated_over, group_name);
  return spec;
}

Tensor row_shard_of(const ShardSpec& spec, const Tensor& tp_slice) {
  if (!spec.rows_split()) return tp_slice;
  WEFT_CHECK(tp_slice.dim() >= 1 && tp_slice.size(0) == spec.tp_rows(),
             "row_shard_of: a slice of {} rows, the spec's has {}", tp_slice.shape(),
             spec.tp_rows());
  Shape s = tp_slice.shape();
  s[0] = spec.row_length + spec.row_padding;
  Tensor out = Tensor::zeros(s, tp_slice.dtype(), tp_slice.device());
  if (spec.row_length > 0) {
    out.narrow(0, spec.row_length).copy_from(tp_slice.narrow(spec.row_offset, spec.row_length));
  }
  return out;
}

Tensor unpadded(const ShardSpec& spec, const Tensor& local) {
  if (!spec.rows_split()) return local;
  return local.narrow(0, spec.row_length);
}

Tensor shard_of(const ShardSpec& spec, const Tensor& full) {
  WEFT_CHECK(full.shape() == spec.global_shape,
             "shard_of: tensor {} does not have the global shape {}", full.shape(),
             spec.global_shape);
  if (spec.rows_split()) return row_shard_of(spec, shard_of(spec.tp_level(), full));
  if (spec.is_shared()) return held_part(spec, shard_of(spec.shared_slice(), full));
  if (!spec.is_split()) return full;
  // The slicing below copies through host pointers; a full tensor on a GPU
  // (a test comparing shards with a module there) is sliced on the host.
  if (!full.device().is_cpu()) return shard_of(spec, full.to(Device::cpu())).to(full.device());
  const int d = spec.split_dim;
  const int64_t extent = full.shape()[d], block = extent / spec.blocks;
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < d; ++i) outer *= full.shape()[i];
  for (int i = d + 1; i < full.dim(); ++i) inner *= full.shape()[i];
  Shape local = full.shape();
  local[d] = spec.blocks * spec.length;
  Tensor out = Tensor::empty(local, full.dtype(), full.device());
  const int64_t esize = dtype_bits(full.dtype()) / 8;
  WEFT_CHECK(esize > 0, "shard_of: packed dtypes cannot be sliced");
  const char* src = static_cast<const char*>(full.raw());
  char* dst = static_cast<char*>(out.raw());
  const size_t run = static_cast<size_t>(spec.length * inner * esize);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t b = 0; b < spec.blocks; ++b) {
      std::memcpy(dst + ((o * spec.blocks + b) * spec.length) * inner * esize,
                  src + (o * extent + b * block + spec.offset) * inner * esize, run);
    }
  }
  return out;
}

Parameter sharded_parameter(const std::string& name, const Tensor& full, int dim, int rank,
                            int size, int64_t blocks, bool decay, Device device) {
  ShardSpec spec = split_spec(full.shape(), dim, "tp", rank, size, blocks);
  return make_parameter(name, shard_of(spec, full), spec, decay, device);
}

}  // namespace weft::parallel
