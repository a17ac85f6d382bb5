#include "weft/kernels/impl/loss.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "weft/core/exec_context.h"
#include "weft/kernels/elementwise.h"
#include "weft/kernels/loss_vocab.h"

namespace weft::kernels::impl {

namespace {

using detail::exp_in_range;
using detail::load;
using detail::store;
using detail::Vocab;
using detail::vocab_of;
using detail::with_floats;

// Validates every target (their shape checked in kernels/loss.cpp) before any parallel loop runs
// (an exception cannot leave an OpenMP region) and returns how many rows are counted.
int64_t check_targets(const Tensor& targets, const Vocab& v, int32_t ignore_index, const char* op) {
  const int32_t* t = targets.data<int32_t>();
  int64_t count = 0;
  for (int64_t n = 0; n < v.rows; ++n) {
    if (t[n] == ignore_index) continue;
    WEFT_CHECK(t[n] >= 0 && t[n] < v.valid_vocab,
               "{}: target {} of row {} is outside the vocabulary [0, {}) and is not the "
               "ignore_index {}; check the data's token ids against the model's vocab_size",
               op, t[n], n, v.valid_vocab, ignore_index);
    ++count;
  }
  return count;
}

// Logits more than this below the row's maximum (or lse) are raised to that
// floor before exp: e^-87 ≈ 1.6e-38 is nothing against a row sum >= 1, and the
// argument stays in exp_in_range's range. The floor is
// computed from the row, not a constant, because a constant clamp lets the
// compiler fold the clamped path into a branch and the loop no longer
// vectorizes.
constexpr float kExpRange = 87.0f;

template <typename T>
float row_max(const T* row, int64_t cols) {
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < cols; ++j) m = std::max(m, load(row, j));
  return m;
}

// A NaN logit makes the sum NaN, so that a diverged model shows a NaN loss
// (the clamp alone would hide it).
template <typename T>
float row_sum_exp(const T* row, int64_t cols, float max) {
  const float floor = max - kExpRange;
  float s = 0.0f;
  int32_t nans = 0;
#pragma omp simd reduction(+ : s, nans)
  for (int64_t j = 0; j < cols; ++j) {
    const float x = load(row, j);
    nans += x != x;
    s += exp_in_range((x > floor ? x : floor) - max);
  }
  return nans ? std::numeric_limits<float>::quiet_NaN() : s;
}

// Mean of lse - target logit over the counted rows, summed in f64 in row
// order so that the loss does not depend on the thread count.
template <typename Logit>
float mean_loss(const float* lse, const int32_t* targets, int64_t rows, int32_t ignore_index,
                int64_t count, Logit&& target_logit) {
  if (count == 0) return 0.0f;
  double total = 0.0;
  for (int64_t n = 0; n < rows; ++n) {
    if (targets[n] == ignore_index) continue;
    total += static_cast<double>(lse[n]) - static_cast<double>(target_logit(n));
  }
  return static_cast<float>(total / static_cast<double>(count));
}

}  // namespace

template <>
int64_t count_targets<Backend::cpu>(const ExecContext&, const Tensor& targets,
                                    int32_t ignore_index) {
  const int32_t* t = targets.data<int32_t>();
  int64_t count = 0;
  for (int64_t n = 0; n < targets.numel(); ++n) count += t[n] != ignore_index;
  return count;
}

template <>
void cross_entropy_forward<Backend::cpu>(const ExecContext& ec, const Tensor& logits,
                                         const Tensor& targets, Tensor& lse, Tensor& loss_out,
                                         const CrossEntropyOptions& opt) {
  constexpr const char* op = "cross_entropy_forward";
  Vocab v = vocab_of(logits, opt);
  int64_t count = check_targets(targets, v, opt.ignore_index, op);
  float* out = lse.data<float>();
  const int32_t* t = targets.data<int32_t>();
  float loss = 0.0f;
  with_floats(logits, [&](const auto* x) {
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
    for (int64_t n = 0; n < v.rows; ++n) {
      const auto* row = x + n * v.cols;
      float m = row_max(row, v.valid_cols);
      out[n] = m + std::log(row_sum_exp(row, v.valid_cols, m));
    }
    loss = mean_loss(out, t, v.rows, opt.ignore_index, count,
                     [&](int64_t n) { return load(x + n * v.cols, t[n]); });
  });
  loss_out.data<float>()[0] = loss;
  loss_out.data<float>()[1] = static_cast<float>(count);
}

template <>
void cross_entropy_backward<Backend::cpu>(const ExecContext& ec, const Tensor& logits,
                                          const Tensor& targets, const Tensor& lse, float dloss,
                                          Tensor& dlogits, const CrossEntropyOptions& opt) {
  constexpr const char* op = "cross_entropy_backward";
  Vocab v = vocab_of(logits, opt);
  int64_t count = check_targets(targets, v, opt.ignore_index, op);
  const int32_t* t = targets.data<int32_t>();
  const float* l = lse.data<float>();
  // count is 0 only when every row is ignored: then every row is zeroed below.
  const float scale =
      count > 0 ? static_cast<float>(static_cast<double>(dloss) / static_cast<double>(count))
                : 0.0f;
  with_floats(logits, [&](const auto* x) {
    with_floats(dlogits, [&](auto* dx) {
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
      for (int64_t n = 0; n < v.rows; ++n) {
        const auto* row = x + n * v.cols;
        auto* drow = dx + n * v.cols;
        if (t[n] == opt.ignore_index) {
          for (int64_t j = 0; j < v.cols; ++j) store(drow, j, 0.0f);
          continue;
        }
        // Under vocab parallelism the target's column may belong to another rank.
        const int64_t target = t[n] - v.start;
        const bool here = target >= 0 && target < v.valid_cols;
        const float lse_n = l[n], floor = lse_n - kExpRange;
        auto softmax = [&](int64_t j) {
          const float z = load(row, j);
          return exp_in_range((z > floor ? z : floor) - lse_n);
        };
        // Read before the row is overwritten: dlogits may alias logits.
        const float p_target = here ? softmax(target) : 0.0f;
#pragma omp simd
        for (int64_t j = 0; j < v.valid_cols; ++j) store(drow, j, softmax(j) * scale);
        for (int64_t j = v.valid_cols; j < v.cols; ++j) store(drow, j, 0.0f);
        if (here) store(drow, target, (p_target - 1.0f) * scale);
      }
    });
  });
}

template <>
void cross_entropy_row_max<Backend::cpu>(const ExecContext& ec, const Tensor& logits,
                                         Tensor& row_max_out, const CrossEntropyOptions& opt) {
  Vocab v = vocab_of(logits, opt);
  float* out = row_max_out.data<float>();
  with_floats(logits, [&](const auto* x) {
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
    for (int64_t n = 0; n < v.rows; ++n) out[n] = row_max(x + n * v.cols, v.valid_cols);
  });
}

template <>
void cross_entropy_target_logit<Backend::cpu>(const ExecContext&, const Tensor& logits,
                                              const Tensor& targets, Tensor& target_logit,
                                              const CrossEntropyOptions& opt) {
  constexpr const char* op = "cross_entropy_target_logit";
  Vocab v = vocab_of(logits, opt);
  check_targets(targets, v, opt.ignore_index, op);
  const int32_t* t = targets.data<int32_t>();
  float* out = target_logit.data<float>();
  with_floats(logits, [&](const auto* x) {
    for (int64_t n = 0; n < v.rows; ++n) {
      int64_t local = t[n] - v.start;
      bool here = t[n] != opt.ignore_index && local >= 0 && local < v.valid_cols;
      out[n] = here ? load(x + n * v.cols, local) : 0.0f;
    }
  });
}

template <>
void cross_entropy_sum_exp<Backend::cpu>(const ExecContext& ec, const Tensor& logits,
                                         const Tensor& row_max_in, Tensor& sum_exp,
                                         const CrossEntropyOptions& opt) {
  Vocab v = vocab_of(logits, opt);
  const float* m = row_max_in.data<float>();
  float* out = sum_exp.data<float>();
  with_floats(logits, [&](const auto* x) {
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
    for (int64_t n = 0; n < v.rows; ++n) out[n] = row_sum_exp(x + n * v.cols, v.valid_cols, m[n]);
  });
}

template <>
void cross_entropy_combine<Backend::cpu>(const ExecContext& ec, const Tensor& row_max_in,
                                         const Tensor& sum_exp, const Tensor& target_logit,
                                         const Tensor& targets, Tensor& lse, Tensor& loss,
                                         int32_t ignore_index) {
  int64_t rows = row_max_in.size(0);
  const float* m = row_max_in.data<float>();
  const float* s = sum_exp.data<float>();
  const float* z = target_logit.data<float>();
  float* out = lse.data<float>();
  for (int64_t n = 0; n < rows; ++n) out[n] = m[n] + std::log(s[n]);
  const int64_t count = count_targets<Backend::cpu>(ec, targets, ignore_index);
  loss.data<float>()[0] = mean_loss(out, targets.data<int32_t>(), rows, ignore_index, count,
                                    [&](int64_t n) { return z[n]; });
  loss.data<float>()[1] = static_cast<float>(count);
}

}  // namespace weft::kernels::impl
