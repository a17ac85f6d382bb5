// The CUDA cross-entropy against the CPU one (the reference, itself tested
// against fp64 in loss_test.cpp) on identical inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cuda_testing.h"
#include "testing.h"
#include "weft/kernels/loss.h"

namespace weft::kernels {
namespace {

using weft::testing::close;
using weft::testing::error_of;
using weft::testing::gpu;
using weft::testing::host;
using weft::testing::kBF16;
using weft::testing::kF32;
using weft::testing::random_tensor;
using weft::testing::Tolerance;

const ExecContext& cpu_ec = ExecContext::host();

// Purely relative: the gradients are small, and an absolute floor would
// pass anything.
constexpr Tolerance kGradF32{1e-5, 0.0};
constexpr Tolerance kGradBF16{kBF16.rel, 0.0};

Tensor targets_tensor(const std::vector<int32_t>& t) {
  return Tensor::from_i32({static_cast<int64_t>(t.size())}, t);
}

// Targets spread over [0, valid), every `ignore_every`-th row ignored.
std::vector<int32_t> make_targets(int64_t rows, int64_t valid, int ignore_every) {
  std::vector<int32_t> t(static_cast<size_t>(rows));
  for (int64_t n = 0; n < rows; ++n) {
    t[static_cast<size_t>(n)] =
        n % ignore_every == 1 ? kIgnoreIndex : static_cast<int32_t>((n * 7919 + 13) % valid);
  }
  return t;
}

// Columns [start, start + len) of a (rows, cols) tensor, as a new tensor.
Tensor columns(const Tensor& x, int64_t start, int64_t len) {
  const int64_t rows = x.size(0), cols = x.size(1);
  const std::vector<float> v = x.to_vector();
  std::vector<float> out(static_cast<size_t>(rows * len));
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(v.begin() + r * cols + start, len, out.begin() + r * len);
  }
  return Tensor::from({rows, len}, out, x.dtype());
}

void expect_loss_near(float cpu, float cuda) {
  EXPECT_NEAR(cuda, cpu, 1e-6 * std::abs(static_cast<double>(cpu))) << "cpu " << cpu;
}

// Ignored rows and padding columns: exactly 0 in the GPU gradient.
void expect_exact_zeros(const Tensor& dlogits, const std::vector<int32_t>& targets,
                        int64_t valid_cols) {
  const int64_t rows = dlogits.size(0), cols = dlogits.size(1);
  const std::vector<float> g = host(dlogits).to_vector();
  int64_t nonzero = 0;
  for (int64_t n = 0; n < rows; ++n) {
    const bool ignored = targets[static_cast<size_t>(n)] == kIgnoreIndex;
    for (int64_t j = ignored ? 0 : valid_cols; j < cols; ++j) {
      nonzero += g[static_cast<size_t>(n * cols + j)] != 0.0f;
    }
  }
  EXPECT_EQ(nonzero, 0);
}

// Forward and backward (f32 and bf16 gradients, and in place) of the whole
// vocabulary, GPU against CPU.
void check_whole_vocab(int64_t rows, int64_t cols, int64_t valid_vocab, DType dtype) {
  SCOPED_TRACE(::testing::Message()
               << rows << "x" << cols << " valid " << valid_vocab << " " << dtype_name(dtype));
  const ExecContext ec = ExecContext::cuda(0);
  const Tensor logits = random_tensor({rows, cols}, 7, -4.0f, 4.0f, dtype);
  const std::vector<int32_t> t = make_targets(rows, valid_vocab, 5);
  const Tensor targets = targets_tensor(t);
  CrossEntropyOptions opt;
  opt.valid_vocab = valid_vocab == cols ? 0 : valid_vocab;
  const Tensor g_logits = gpu(logits), g_targets = gpu(targets);

  Tensor lse = Tensor::empty({rows});
  const float loss = cross_entropy_forward(cpu_ec, logits, targets, lse, opt);
  Tensor g_lse = ec.empty({rows});
  const float g_loss = cross_entropy_forward(ec, g_logits, g_targets, g_lse, opt);
  expect_loss_near(loss, g_loss);
  EXPECT_TRUE(close(lse, host(g_lse), kF32));
  EXPECT_EQ(count_targets(ec, g_targets), count_targets(cpu_ec, targets));

  for (DType gdt : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(::testing::Message() << "dlogits " << dtype_name(gdt));
    Tensor grad = Tensor::empty({rows, cols}, gdt);
    cross_entropy_backward(cpu_ec, logits, targets, lse, 2.5f, grad, opt);
    // The CPU's lse on both sides: the gradient is compared alone.
    Tensor g_grad = ec.empty({rows, cols}, gdt);
    cross_entropy_backward(ec, g_logits, g_targets, gpu(lse), 2.5f, g_grad, opt);
    EXPECT_TRUE(close(grad, host(g_grad), gdt == DType::f32 ? kGradF32 : kGradBF16));
    expect_exact_zeros(g_grad, t, valid_vocab);
    if (gdt == dtype) {
      Tensor in_place = gpu(logits);
      cross_entropy_backward(ec, in_place, g_targets, gpu(lse), 2.5f, in_place, opt);
      EXPECT_TRUE(close(grad, host(in_place), gdt == DType::f32 ? kGradF32 : kGradBF16));
    }
  }
}

TEST(CudaCrossEntropy, SmallMatchesCpu) {
  WEFT_REQUIRE_GPU();
  check_whole_vocab(37, 771, 771, DType::f32);
  check_whole_vocab(37, 771, 771, DType::bf16);
}

TEST(CudaCrossEntropy, PaddedVocabMatchesCpu) {
  WEFT_REQUIRE_GPU();
  check_whole_vocab(37, 771, 700, DType::f32);
  check_whole_vocab(37, 771, 700, DType::bf16);
}

TEST(CudaCrossEntropy, GptVocabMatchesCpu) {
  WEFT_REQUIRE_GPU();
  check_whole_vocab(1024, 50304, 50257, DType::f32);
  check_whole_vocab(1024, 50304, 50304, DType::bf16);
}

TEST(CudaCrossEntropy, EveryRowIgnoredGivesZeroLossAndGradient) {
  WEFT_REQUIRE_GPU();
  const ExecContext ec = ExecContext::cuda(0);
  const Tensor logits = gpu(random_tensor({4, 33}, 3));
  const std::vector<int32_t> t(4, kIgnoreIndex);
  const Tensor targets = gpu(targets_tensor(t));
  Tensor lse = ec.empty({4});
  EXPECT_EQ(cross_entropy_forward(ec, logits, targets, lse), 0.0f);
  Tensor grad = ec.empty({4, 33});
  cross_entropy_backward(ec, logits, targets, lse, 1.0f, grad);
  expect_exact_zeros(grad, t, 33);
  EXPECT_EQ(count_targets(ec, targets), 0);
}

TEST(CudaCrossEntropy, NanLogitGivesNanLoss) {
  WEFT_REQUIRE_GPU();
  const ExecContext ec = ExecContext::cuda(0);
  std::vector<float> v = random_tensor({3, 40}, 4).to_vector();
  v[45] = std::nanf("");  // row 1
  const Tensor logits = Tensor::from({3, 40}, v);
  const Tensor targets = targets_tensor({0, 1, 2});
  Tensor lse = ec.empty({3});
  EXPECT_TRUE(std::isnan(cross_entropy_forward(ec, gpu(logits), gpu(targets), lse)));
  const std::vector<float> l = host(lse).to_vector();
  EXPECT_FALSE(std::isnan(l[0]));
  EXPECT_TRUE(std::isnan(l[1]));
}

TEST(CudaCrossEntropy, InvalidTargetThrowsNamingRowAndValue) {
  WEFT_REQUIRE_GPU();
  const ExecContext ec = ExecContext::cuda(0);
  const Tensor logits = gpu(random_tensor({4, 10}, 5));
  Tensor lse = ec.empty({4});
  Tensor grad = ec.empty({4, 10});
  Tensor z = ec.empty({4});
  const Tensor too_big = gpu(targets_tensor({0, 1, 2, 10}));
  const Tensor negative = gpu(targets_tensor({0, -5, 1, 2}));
  const std::string forward = error_of([&] { cross_entropy_forward(ec, logits, too_big, lse); });
  EXPECT_NE(forward.find("target 10 of row 3"), std::string::npos) << forward;
  const std::string backward =
      error_of([&] { cross_entropy_backward(ec, logits, negative, lse, 1.0f, grad); });
  EXPECT_NE(backward.find("target -5 of row 1"), std::string::npos) << backward;
  EXPECT_NE(error_of([&] { cross_entropy_target_logit(ec, logits, too_big, z); }), "");
  // Padding ids are not valid targets either.
  CrossEntropyOptions padded;
  padded.valid_vocab = 8;
  const Tensor padding = gpu(targets_tensor({0, 8, 1, 2}));
  const std::string pad =
      error_of([&] { cross_entropy_forward(ec, logits, padding, lse, padded); });
  EXPECT_NE(pad.find("target 8 of row 1"), std::string::npos) << pad;
}

// The vocab-parallel assembly, three ranks' slices of a padded vocabulary
// (the last slice only padding), every piece GPU against CPU from identical
// inputs; the all-reduces are done on the host.
void check_vocab_parallel(DType dtype) {
  SCOPED_TRACE(dtype_name(dtype));
  const ExecContext ec = ExecContext::cuda(0);
  constexpr int64_t rows = 37, cols = 771, slice = 257, valid = 500;
  const Tensor logits = random_tensor({rows, cols}, 11, -4.0f, 4.0f, dtype);
  const std::vector<int32_t> t = make_targets(rows, valid, 6);
  const Tensor targets = targets_tensor(t), g_targets = gpu(targets);
  std::vector<Tensor> slices;
  std::vector<CrossEntropyOptions> opts;
  for (int64_t r = 0; r < 3; ++r) {
    slices.push_back(columns(logits, r * slice, slice));
    CrossEntropyOptions o;
    o.vocab_start = r * slice;
    o.valid_vocab = valid;
    opts.push_back(o);
  }
  std::vector<float> max(rows, -INFINITY), sum(rows, 0.0f), target(rows, 0.0f);
  for (size_t r = 0; r < slices.size(); ++r) {
    SCOPED_TRACE(::testing::Message() << "slice " << r);
    Tensor m = Tensor::empty({rows}), g_m = ec.empty({rows});
    cross_entropy_row_max(cpu_ec, slices[r], m, opts[r]);
    cross_entropy_row_max(ec, gpu(slices[r]), g_m, opts[r]);
    EXPECT_EQ(m.to_vector(), host(g_m).to_vector());
    Tensor z = Tensor::empty({rows}), g_z = ec.empty({rows});
    cross_entropy_target_logit(cpu_ec, slices[r], targets, z, opts[r]);
    cross_entropy_target_logit(ec, gpu(slices[r]), g_targets, g_z, opts[r]);
    EXPECT_EQ(z.to_vector(), host(g_z).to_vector());
    const std::vector<float> mv = m.to_vector(), zv = z.to_vector();
    for (size_t n = 0; n < static_cast<size_t>(rows); ++n) {
      max[n] = std::max(max[n], mv[n]);
      target[n] += zv[n];
    }
  }
  const Tensor row_max = Tensor::from({rows}, max);
  for (size_t r = 0; r < slices.size(); ++r) {
    SCOPED_TRACE(::testing::Message() << "slice " << r);
    Tensor s = Tensor::empty({rows}), g_s = ec.empty({rows});
    cross_entropy_sum_exp(cpu_ec, slices[r], row_max, s, opts[r]);
    cross_entropy_sum_exp(ec, gpu(slices[r]), gpu(row_max), g_s, opts[r]);
    EXPECT_TRUE(close(s, host(g_s), kF32));
    const std::vector<float> sv = s.to_vector();
    for (size_t n = 0; n < static_cast<size_t>(rows); ++n) sum[n] += sv[n];
  }
  const Tensor sum_exp = Tensor::from({rows}, sum), target_logit = Tensor::from({rows}, target);
  Tensor lse = Tensor::empty({rows}), g_lse = ec.empty({rows});
  const float loss = cross_entropy_combine(cpu_ec, row_max, sum_exp, target_logit, targets, lse);
  const float g_loss =
      cross_entropy_combine(ec, gpu(row_max), gpu(sum_exp), gpu(target_logit), g_targets, g_lse);
  expect_loss_near(loss, g_loss);
  EXPECT_TRUE(close(lse, host(g_lse), kF32));
  const Tolerance grad_tol = dtype == DType::f32 ? kGradF32 : kGradBF16;
  for (size_t r = 0; r < slices.size(); ++r) {
    SCOPED_TRACE(::testing::Message() << "slice " << r);
    Tensor grad = Tensor::empty({rows, slice}, dtype), g_grad = ec.empty({rows, slice}, dtype);
    cross_entropy_backward(cpu_ec, slices[r], targets, lse, 1.0f, grad, opts[r]);
    cross_entropy_backward(ec, gpu(slices[r]), g_targets, gpu(lse), 1.0f, g_grad, opts[r]);
    EXPECT_TRUE(close(grad, host(g_grad), grad_tol));
    const int64_t valid_cols = std::clamp<int64_t>(valid - opts[r].vocab_start, 0, slice);
    expect_exact_zeros(g_grad, t, valid_cols);
  }
}

TEST(CudaCrossEntropy, VocabParallelPiecesMatchCpu) {
  WEFT_REQUIRE_GPU();
  check_vocab_parallel(DType::f32);
  check_vocab_parallel(DType::bf16);
}

// The loss left on the device (mean and count), the targets checked by the
// caller, and the backward scaled by the forward's count read on the device.
TEST(CudaCrossEntropy, LossTensorAndDeviceCountMatchCpu) {
  WEFT_REQUIRE_GPU();
  const ExecContext ec = ExecContext::cuda(0);
  const int64_t rows = 777, vocab = 50304;
  const Tensor logits = random_tensor({rows, vocab}, 11, -4, 4, DType::bf16);
  const Tensor targets = targets_tensor(make_targets(rows, vocab, 5));
  Tensor lse = Tensor::empty({rows}), loss = Tensor::empty({2});
  cross_entropy_forward(cpu_ec, logits, targets, lse, loss);
  const Tensor g_logits = gpu(logits), g_targets = gpu(targets);
  Tensor g_lse = gpu(lse), g_loss = gpu(loss);
  CrossEntropyOptions opt;
  opt.targets_checked = true;
  cross_entropy_forward(ec, g_logits, g_targets, g_lse, g_loss, opt);
  const Tensor h_loss = host(g_loss);
  expect_loss_near(loss.data<float>()[0], h_loss.data<float>()[0]);
  EXPECT_EQ(h_loss.data<float>()[1], loss.data<float>()[1]);
  Tensor grad = Tensor::empty({rows, vocab}, DType::bf16), g_grad = gpu(grad);
  cross_entropy_backward(cpu_ec, logits, targets, lse, 0.5f, grad);
  opt.counted = &g_loss;
  cross_entropy_backward(ec, g_logits, g_targets, g_lse, 0.5f, g_grad, opt);
  EXPECT_TRUE(close(grad, host(g_grad), kGradBF16));
}

}  // namespace
}  // namespace weft::kernels
