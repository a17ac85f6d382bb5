#include "weft/parallel/parameter.h"

#include <cstring>

namespace weft::parallel {

Parameter make_parameter(std::string name, Tensor value, ShardSpec spec, bool decay) {
  WEFT_CHECK(value.dtype() == DType::f32, "parameter {} must be f32 (master weights), got {}", name,
             dtype_name(value.dtype()));
  Parameter p;
  p.name = std::move(name);
  {
    ScopedMemoryTag tag(MemoryTag::params);
    p.value = value.clone();
  }
  p.grad = Tensor::zeros(value.shape(), DType::f32, value.device(), MemoryTag::grads);
  p.spec = std::move(spec);
  p.decay = decay;
  return p;
}

ShardSpec split_spec(const Shape& global, int dim, const std::string& group_name, int rank,
                     int group_size, int64_t blocks) {
  ShardSpec spec;
  spec.global_shape = global;
  spec.replicated_over = {"dp"};
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

Tensor shard_of(const ShardSpec& spec, const Tensor& full) {
  WEFT_CHECK(full.shape() == spec.global_shape,
             "shard_of: tensor {} does not have the global shape {}", full.shape(),
             spec.global_shape);
  if (!spec.is_split()) return full;
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
                            int size, int64_t blocks, bool decay) {
  ShardSpec spec = split_spec(full.shape(), dim, "tp", rank, size, blocks);
  return make_parameter(name, shard_of(spec, full), spec, decay);
}

}  // namespace weft::parallel
