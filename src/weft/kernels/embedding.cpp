#include "weft/kernels/embedding.h"

#include "weft/kernels/dispatch.h"
#include "weft/kernels/impl/embedding.h"

namespace weft::kernels {

namespace {

// Gradient tables are f32; a table read (wte for the lookup) may be bf16 too.
void check_table(const Tensor& table, const char* op, const char* name, bool read_only) {
  const bool dtype_ok = table.dtype() == DType::f32 || (read_only && table.dtype() == DType::bf16);
  WEFT_CHECK(table.dim() == 2 && dtype_ok, "{}: {} must be an {} table (rows, C), got {} {}", op,
             name, read_only ? "f32 or bf16" : "f32", dtype_name(table.dtype()), table.shape());
}

// Checks that act is (B,T,C) for the table's C.
void check_activation(const Tensor& act, int64_t channels, const char* op, const char* name) {
  WEFT_CHECK(act.dim() == 3 && act.size(2) == channels &&
                 (act.dtype() == DType::f32 || act.dtype() == DType::bf16),
             "{}: {} must be f32 or bf16 of shape (B, T, {}), got {} {}", op, name, channels,
             dtype_name(act.dtype()), act.shape());
}

// The table (rows, C) and the activation (B, T, C) of one kernel, checked.
struct Shapes {
  int64_t table_rows, channels, batch, seq;
};
Shapes checked_shapes(const Tensor& table, const Tensor& act, const char* op,
                      const char* table_name, const char* act_name, bool read_only) {
  check_table(table, op, table_name, read_only);
  check_activation(act, table.size(1), op, act_name);
  return {table.size(0), table.size(1), act.size(0), act.size(1)};
}

// The tokens' shape and the vocabulary options; the backends check the ids.
void check_token_args(const Tensor& tokens, int64_t batch, int64_t seq, const EmbeddingOptions& opt,
                      const char* op) {
  WEFT_CHECK(tokens.dim() == 2 && tokens.dtype() == DType::i32 && tokens.size(0) == batch &&
                 tokens.size(1) == seq,
             "{}: tokens must be i32 of shape ({}, {}), got {} {}", op, batch, seq,
             dtype_name(tokens.dtype()), tokens.shape());
  WEFT_CHECK(opt.vocab_start >= 0, "{}: vocab_start must be >= 0, got {}", op, opt.vocab_start);
  WEFT_CHECK(opt.valid_vocab >= 0, "{}: valid_vocab must be >= 0 (0 = all rows), got {}", op,
             opt.valid_vocab);
}

void check_positions(int64_t seq, int64_t table_rows, int64_t pos_offset, const char* op) {
  WEFT_CHECK(pos_offset >= 0 && pos_offset + seq <= table_rows,
             "{}: positions [{}, {}) do not fit the position table of {} rows; the sequence is "
             "longer than the model's context length",
             op, pos_offset, pos_offset + seq, table_rows);
}

}  // namespace

void embedding_forward(const ExecContext& ec, const Tensor& tokens, const Tensor& wte, Tensor& out,
                       const EmbeddingOptions& opt) {
  constexpr const char* op = "embedding_forward";
  const Shapes s = checked_shapes(wte, out, op, "wte", "out", true);
  check_token_args(tokens, s.batch, s.seq, opt, op);
  return detail::dispatch(ec, "embedding_forward", {&tokens, &wte, &out}, [&]<Backend B>() {
    return impl::embedding_forward<B>(ec, tokens, wte, out, opt);
  });
}

void embedding_backward(const ExecContext& ec, const Tensor& dout, const Tensor& tokens,
                        Tensor& dwte, const EmbeddingOptions& opt) {
  constexpr const char* op = "embedding_backward";
  const Shapes s = checked_shapes(dwte, dout, op, "dwte", "dout", false);
  check_token_args(tokens, s.batch, s.seq, opt, op);
  return detail::dispatch(ec, "embedding_backward", {&dout, &tokens, &dwte}, [&]<Backend B>() {
    return impl::embedding_backward<B>(ec, dout, tokens, dwte, opt);
  });
}

void position_embedding_forward(const ExecContext& ec, const Tensor& wpe, Tensor& out,
                                int64_t pos_offset, bool sequence_major) {
  constexpr const char* op = "position_embedding_forward";
  const Shapes s = checked_shapes(wpe, out, op, "wpe", "out", false);
  check_positions(sequence_major ? s.batch : s.seq, s.table_rows, pos_offset, op);
  return detail::dispatch(ec, "position_embedding_forward", {&wpe, &out}, [&]<Backend B>() {
    return impl::position_embedding_forward<B>(ec, wpe, out, pos_offset, sequence_major);
  });
}

void position_embedding_backward(const ExecContext& ec, const Tensor& dout, Tensor& dwpe,
                                 int64_t pos_offset, bool sequence_major) {
  constexpr const char* op = "position_embedding_backward";
  const Shapes s = checked_shapes(dwpe, dout, op, "dwpe", "dout", false);
  check_positions(sequence_major ? s.batch : s.seq, s.table_rows, pos_offset, op);
  return detail::dispatch(ec, "position_embedding_backward", {&dout, &dwpe}, [&]<Backend B>() {
    return impl::position_embedding_backward<B>(ec, dout, dwpe, pos_offset, sequence_major);
  });
}

}  // namespace weft::kernels
