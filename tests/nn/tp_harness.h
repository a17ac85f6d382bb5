// Shared pieces of the TP-equivalence cases.
#pragma once

#include <gtest/gtest.h>

#include "contexts.h"
#include "testing.h"
#include "weft/comm/process_group.h"
#include "weft/kernels/transpose.h"
#include "weft/nn/linear.h"
#include "weft/nn/module.h"
#include "weft/optim/grad_sync.h"
#include "weft/parallel/mappings.h"

namespace weft::nn::testing {

using weft::testing::close;
using weft::testing::kBF16;
using weft::testing::kF32;
using weft::testing::random_tensor;

// A full (B, T, ...) activation in the residual stream's token order:
// sequence-major (T, B, ...) under seq SP (parallel/context.h). On
// test_device() (contexts.h), where the modules under test take their inputs;
// the comparisons read either device.
inline Tensor in_layout(const Tensor& full, SequenceParallel sp) {
  if (sp != SequenceParallel::seq) return on_test_device(full);
  Shape s = full.shape();
  std::swap(s[0], s[1]);
  Tensor out = Tensor::empty(s, full.dtype());
  kernels::transpose01(ExecContext::host(), full.to(Device::cpu()), out);
  return on_test_device(out);
}

// This rank's share of a full (B, T, ...) activation under sequence
// parallelism: its block of rows in the residual-stream layout, on
// test_device().
inline Tensor local_tokens(const Tensor& full, SequenceParallel sp, comm::ProcessGroup& tp) {
  if (sp == SequenceParallel::off) return on_test_device(full);
  return parallel::slice_along(exec_of(in_layout(full, sp)), in_layout(full, sp), 0, tp.size(),
                               tp.rank());
}

// Compares every parameter's value and gradient with the TP=1 module's,
// through the parameter's ShardSpec. The gradients of shared slices' common
// rows (replicated key/value heads) are summed over their share groups
// first, in place, as gradient sync does.
inline void expect_same_parameters(Module& tp_module, Module& reference) {
  std::vector<Parameter*> mine = tp_module.parameters(), ref = reference.parameters();
  ASSERT_EQ(mine.size(), ref.size());
  optim::sum_shared_gradients(mine);
  for (size_t i = 0; i < mine.size(); ++i) {
    SCOPED_TRACE(mine[i]->name);
    ASSERT_EQ(mine[i]->name, ref[i]->name);
    // Bit-identical initialization.
    EXPECT_EQ(mine[i]->value.to_vector(), shard_of(mine[i]->spec, ref[i]->value).to_vector());
    Tensor g = mine[i]->grad;
    if (mine[i]->grad_sum_group)
      g = parallel::all_reduce_sum(exec_of(g), *mine[i]->grad_sum_group, g);
    EXPECT_TRUE(close(shard_of(mine[i]->spec, ref[i]->grad), g, kF32, 1.0));
  }
}

}  // namespace weft::nn::testing
