#include "weft/parallel/context/chunks.h"

#include <cstring>

#include "weft/core/error.h"

namespace weft::parallel::context {

void check_sequence(int64_t sequence, int size) {
  WEFT_CHECK(size >= 1, "--cp {} must be at least 1", size);
  WEFT_CHECK(sequence > 0 && sequence % (2 * size) == 0,
             "--seq {} is not divisible by 2·cp = {}: context parallelism cuts each sequence into "
             "2·cp equal chunks; choose --seq a multiple of {}",
             sequence, 2 * size, 2 * size);
}

Tensor local_columns(const ExecContext& ec, const Tensor& tokens, const SequenceChunks& chunks) {
  WEFT_CHECK(tokens.dim() == 2 && tokens.size(1) == chunks.sequence,
             "context parallelism: a batch of (B, {}) tokens, got {}", chunks.sequence,
             tokens.shape());
  const Tensor host = tokens.to(Device::cpu());
  const int64_t B = tokens.size(0), c = chunks.chunk(), S = chunks.sequence;
  const int64_t es = dtype_storage_bytes(tokens.dtype(), 1);
  Tensor out = Tensor::empty({B, 2 * c}, tokens.dtype());
  const char* src = static_cast<const char*>(host.raw());
  char* dst = static_cast<char*>(out.raw());
  for (int64_t b = 0; b < B; ++b) {
    for (int i = 0; i < 2; ++i) {
      const int64_t first = chunks.chunk_index(chunks.rank, i) * c;
      std::memcpy(dst + (b * 2 * c + i * c) * es, src + (b * S + first) * es,
                  static_cast<size_t>(c * es));
    }
  }
  return tokens.device().is_cpu() ? out : ec.upload(out, current_memory_tag());
}

Tensor local_rows(const Tensor& table, const SequenceChunks& chunks) {
  WEFT_CHECK(table.dim() >= 1 && table.size(0) >= chunks.sequence,
             "context parallelism: a table of at least {} rows (one per position), got {}",
             chunks.sequence, table.shape());
  Shape s = table.shape();
  s[0] = chunks.local();
  Tensor out = Tensor::empty(s, table.dtype(), table.device());
  const int64_t c = chunks.chunk();
  for (int i = 0; i < 2; ++i) {
    out.narrow(i * c, c).copy_from(table.narrow(chunks.chunk_index(chunks.rank, i) * c, c));
  }
  return out;
}

void add_local_rows(const Tensor& d, Tensor& table_grad, const SequenceChunks& chunks) {
  WEFT_CHECK(d.dtype() == DType::f32 && table_grad.dtype() == DType::f32 && d.device().is_cpu() &&
                 table_grad.device().is_cpu() && d.size(0) == chunks.local() &&
                 table_grad.size(0) >= chunks.sequence &&
                 d.numel() / d.size(0) == table_grad.numel() / table_grad.size(0),
             "context parallelism: local rows {} and their table's gradient {} (f32, host)",
             d.shape(), table_grad.shape());
  const int64_t c = chunks.chunk(), width = d.numel() / d.size(0);
  const float* src = d.data<float>();
  float* dst = table_grad.data<float>();
  for (int i = 0; i < 2; ++i) {
    float* to = dst + chunks.chunk_index(chunks.rank, i) * c * width;
    const float* from = src + i * c * width;
    for (int64_t e = 0; e < c * width; ++e) to[e] += from[e];
  }
}

}  // namespace weft::parallel::context
