// Bitwise comparison of two tensors (on any device), for results that must
// equal a reference exactly: random streams, masks, copies, and sums that
// add the same numbers in the same order.
#pragma once

#include <gtest/gtest.h>

#include "weft/core/tensor.h"

namespace weft::testing {

inline ::testing::AssertionResult bitwise_equal(const Tensor& expected, const Tensor& actual) {
  const Tensor e = expected.to(Device::cpu()), a = actual.to(Device::cpu());
  if (!(e.shape() == a.shape()) || e.dtype() != a.dtype()) {
    return ::testing::AssertionFailure()
           << dtype_name(a.dtype()) << " " << a.shape() << " != expected " << dtype_name(e.dtype())
           << " " << e.shape();
  }
  const auto* pe = static_cast<const unsigned char*>(e.raw());
  const auto* pa = static_cast<const unsigned char*>(a.raw());
  for (int64_t i = 0; i < e.nbytes(); ++i) {
    if (pe[i] != pa[i]) {
      return ::testing::AssertionFailure()
             << "byte " << i << " of " << e.nbytes() << " differs: got " << int{pa[i]}
             << ", expected " << int{pe[i]};
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace weft::testing
