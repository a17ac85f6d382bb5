#include "weft/comm/detail/op.h"

#include "weft/comm/detail/reduce.h"
#include "weft/core/error.h"

namespace weft::comm::detail {

std::string ranks_str(const std::vector<int>& ranks, const std::vector<int>& world_ranks) {
  std::vector<int> w;
  for (int r : ranks) w.push_back(world_ranks[static_cast<size_t>(r)]);
  return w == ranks ? format("{}", ranks) : format("{} (world ranks {})", ranks, w);
}

namespace {

char* bytes_of(const Tensor& t) { return static_cast<char*>(t.raw()); }

// The bytes of one rank's share of the flat buffer: the parts' sizes summed
// (all_reduce, all_gather: the inputs; reduce_scatter: the outputs).
int64_t share_bytes(const std::vector<Tensor>& parts) {
  int64_t bytes = 0;
  for (const Tensor& t : parts) bytes += t.nbytes();
  return bytes;
}

}  // namespace

void pack_coalesced(Op& op, int rank, int size) {
  const DType dtype = op.parts_in.front().dtype();
  const Device device = op.parts_in.front().device();
  const int64_t elem_bits = dtype_bits(dtype);
  switch (op.kind) {
    case OpKind::all_reduce: {
      const int64_t bytes = share_bytes(op.parts_in);
      Tensor flat = Tensor::empty({bytes * 8 / elem_bits}, dtype, device);
      int64_t off = 0;
      for (const Tensor& t : op.parts_in) {
        copy_on(device, bytes_of(flat) + off, t.raw(), t.nbytes());
        off += t.nbytes();
      }
      op.in = op.out = flat;
      break;
    }
    case OpKind::all_gather: {
      const int64_t share = share_bytes(op.parts_in);
      const int64_t elems = share * 8 / elem_bits;
      Tensor flat = Tensor::empty({elems * size}, dtype, device);
      int64_t off = rank * share;
      for (const Tensor& t : op.parts_in) {
        copy_on(device, bytes_of(flat) + off, t.raw(), t.nbytes());
        off += t.nbytes();
      }
      op.out = flat;
      op.in = flat.narrow(rank * elems, elems);
      break;
    }
    case OpKind::reduce_scatter: {
      const int64_t share = share_bytes(op.parts_out);
      const int64_t elems = share * 8 / elem_bits;
      Tensor flat = Tensor::empty({elems * size}, dtype, device);
      int64_t off = 0;
      for (int p = 0; p < size; ++p) {
        for (const Tensor& t : op.parts_in) {
          const int64_t chunk = t.nbytes() / size;
          copy_on(device, bytes_of(flat) + off, bytes_of(t) + p * chunk, chunk);
          off += chunk;
        }
      }
      op.in = flat;
      op.out = flat.narrow(rank * elems, elems);
      break;
    }
    default: WEFT_FAIL("internal: {} cannot be coalesced", op.what);
  }
  op.in_place = true;
  settle(device);
}

void unpack_coalesced(Op& op, int size) {
  const Device device = op.out.device();
  switch (op.kind) {
    case OpKind::all_reduce: {
      int64_t off = 0;
      for (const Tensor& t : op.parts_out) {
        copy_on(device, t.raw(), bytes_of(op.out) + off, t.nbytes());
        off += t.nbytes();
      }
      break;
    }
    case OpKind::all_gather: {
      const int64_t share = op.in.nbytes();
      for (int p = 0; p < size; ++p) {
        int64_t off = p * share;
        for (const Tensor& t : op.parts_out) {
          const int64_t chunk = t.nbytes() / size;
          copy_on(device, bytes_of(t) + p * chunk, bytes_of(op.out) + off, chunk);
          off += chunk;
        }
      }
      break;
    }
    case OpKind::reduce_scatter: {
      int64_t off = 0;
      for (const Tensor& t : op.parts_out) {
        copy_on(device, t.raw(), bytes_of(op.out) + off, t.nbytes());
        off += t.nbytes();
      }
      break;
    }
    default: WEFT_FAIL("internal: {} cannot be coalesced", op.what);
  }
  settle(device);
}

}  // namespace weft::comm::detail
