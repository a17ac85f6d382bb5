// Helpers shared by the tests: random tensors, tolerance checks and a
// finite-difference gradient driver.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "weft/core/tensor.h"

namespace weft::testing {

// Uniform values in [lo, hi) from a fixed seed, stored as `dtype`.
inline Tensor random_tensor(const Shape& shape, uint32_t seed, float lo = -1.0f, float hi = 1.0f,
                            DType dtype = DType::f32) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(shape.numel()));
  for (float& x : v) x = dist(gen);
  return Tensor::from(shape, v, dtype);
}

// docs/design.md's tolerances (§15): fail only when both the relative and the absolute
// limit are exceeded.
struct Tolerance {
  double rel;
  double abs;
};
inline constexpr Tolerance kF32{1e-5, 1e-6};
inline constexpr Tolerance kBF16{1.6e-2, 1e-5};

inline ::testing::AssertionResult close(const std::vector<double>& expected,
                                        const std::vector<float>& actual, Tolerance tol,
                                        double scale = 0.0) {
  if (expected.size() != actual.size()) {
    return ::testing::AssertionFailure()
           << "size " << actual.size() << " != expected " << expected.size();
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    double e = expected[i], a = actual[i];
    double diff = std::abs(a - e);
    double ref = std::max(std::abs(e), scale);
    if (!(diff <= tol.abs || diff <= tol.rel * ref)) {
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << a << ", expected " << e << " (diff " << diff << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult close(const Tensor& expected, const Tensor& actual, Tolerance tol,
                                        double scale = 0.0) {
  if (!(expected.shape() == actual.shape())) {
    return ::testing::AssertionFailure()
           << "shape " << actual.shape() << " != expected " << expected.shape();
  }
  std::vector<float> e = expected.to_vector();
  return close(std::vector<double>(e.begin(), e.end()), actual.to_vector(), tol, scale);
}

// Central finite difference of a scalar loss with respect to every element of
// `x` (f32), evaluated in double around the current values.
inline std::vector<double> finite_difference(Tensor& x, const std::function<double()>& loss,
                                             double eps = 1e-3) {
  std::vector<double> grad(static_cast<size_t>(x.numel()));
  float* p = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    float saved = p[i];
    p[i] = static_cast<float>(saved + eps);
    double up = loss();
    p[i] = static_cast<float>(saved - eps);
    double down = loss();
    p[i] = saved;
    grad[static_cast<size_t>(i)] = (up - down) / (2 * eps);
  }
  return grad;
}

// Weighted sum Σ w_i y_i with fixed random weights: a scalar "loss" whose
// gradient with respect to y is w, used to check backward passes.
inline double weighted_sum(const Tensor& y, const Tensor& w) {
  std::vector<float> a = y.to_vector(), b = w.to_vector();
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// A fresh directory under the system temp dir, removed with everything in it
// when the test ends.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "weft-test-XXXXXX").string();
    EXPECT_NE(::mkdtemp(tmpl.data()), nullptr);
    path_ = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& root() const { return path_; }
  std::string path(const std::string& name) const { return (path_ / name).string(); }
  // The names of the directory's entries, sorted.
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path_)) {
      names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::filesystem::path path_;
};

// The message of the weft::Error that fn throws; "" when it throws none.
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace weft::testing
