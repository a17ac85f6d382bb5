// Every kernel runs on an execution context and dispatches on its device;
// this build has CPU kernels only.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "testing.h"
#include "weft/core/cuda.h"
#include "weft/core/exec_context.h"
#include "weft/kernels/activation.h"
#include "weft/kernels/attention.h"
#include "weft/kernels/embedding.h"
#include "weft/kernels/gemm.h"
#include "weft/kernels/loss.h"
#include "weft/kernels/norm.h"
#include "weft/kernels/optimizer.h"
#include "weft/kernels/random.h"
#include "weft/kernels/transpose.h"

namespace weft::kernels {
namespace {

using weft::testing::random_tensor;

// The message of the weft::Error that f throws ("" if it throws none).
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Dispatch, ACudaContextWithoutAGpuRunsNothing) {
  if (cuda::device_count() > 0)
    GTEST_SKIP() << "this machine has a GPU (the Cuda* tests run there)";
  const ExecContext cuda(Device::cuda(0), 0);
  // batched_gemm multiplies raw memory: only the context says where it is.
  std::vector<float> a(4, 1.0f), b(4, 1.0f), c(4, 0.0f);
  auto matrices = [](std::vector<float>& v) {
    StridedMatrices m;
    m.data = v.data();
    m.rows = 2;
    m.cols = 2;
    m.row_stride = 2;
    return m;
  };
  const std::string msg =
      error_of([&] { batched_gemm(cuda, matrices(a), matrices(b), matrices(c)); });
  EXPECT_NE(msg.find("batched_gemm: tensors on cuda:0 but " + cuda::unavailable_reason()),
            std::string::npos)
      << msg;
  EXPECT_EQ(c, std::vector<float>(4, 0.0f));
  // Nor can it allocate.
  EXPECT_THROW(cuda.empty({2}), Error);
}

TEST(Dispatch, TensorsMustBeOnTheContextsDevice) {
  const ExecContext cuda(Device::cuda(0), 0);
  Tensor x = random_tensor({4, 6}, 1), y = Tensor::empty({4, 6});
  Tensor w = random_tensor({6, 6}, 2), gamma = Tensor::full({6}, 1.0f), beta = Tensor::zeros({6});
  Tensor mean = Tensor::empty({4}), rstd = Tensor::empty({4}),
         mask = Tensor::empty({4, 6}, DType::u8);
  Tensor m = Tensor::zeros({4, 6}), v = Tensor::zeros({4, 6});
  Tensor targets = Tensor::from_i32({4}, std::vector<int32_t>{0, 1, 2, 3}),
         lse = Tensor::empty({4});
  Tensor tokens = Tensor::from_i32({2, 2}, std::vector<int32_t>{0, 1, 2, 3});
  Tensor emb = Tensor::empty({2, 2, 6}), swapped = Tensor::empty({6, 4});
  Tensor qkv = random_tensor({1, 4, 6}, 3), out = Tensor::empty({1, 4, 2});
  AttentionSaved saved;
  AttentionWorkspace ws;
  const std::vector<std::pair<std::string, std::function<void()>>> calls = {
      {"gemm", [&] { gemm(cuda, x, w, y); }},
      {"gelu_forward", [&] { gelu_forward(cuda, x, y); }},
      {"add", [&] { add(cuda, x, x, y); }},
      {"scale", [&] { scale(cuda, y, 2.0f); }},
      {"layer_norm_forward",
       [&] { layer_norm_forward(cuda, x, gamma, beta, 1e-5f, y, mean, rstd); }},
      {"adamw_step", [&] { adamw_step(cuda, y, x, m, v, {}); }},
      {"sum_of_squares", [&] { sum_of_squares(cuda, x); }},
      {"dropout_forward", [&] { dropout_forward(cuda, x, 0.1f, 1, 0, y, mask); }},
      {"fill_uniform", [&] { fill_uniform(cuda, 1, 0, y); }},
      {"cross_entropy_forward", [&] { cross_entropy_forward(cuda, x, targets, lse); }},
      {"embedding_forward", [&] { embedding_forward(cuda, tokens, w, emb); }},
      {"attention_forward", [&] { attention_forward(cuda, qkv, {.heads = 1}, out, saved, ws); }},
      {"transpose01", [&] { transpose01(cuda, x, swapped); }},
  };
  for (const auto& [name, call] : calls) {
    const std::string msg = error_of(call);
    EXPECT_NE(msg.find(name + ": argument"), std::string::npos) << name << ": " << msg;
    EXPECT_NE(msg.find("is on cpu but the execution context runs on cuda:0"), std::string::npos)
        << name << ": " << msg;
  }
  // Nothing ran: the outputs are as they were.
  EXPECT_EQ(m.to_vector(), std::vector<float>(24, 0.0f));
}

TEST(Dispatch, AContextsThreadsRunTheKernel) {
  // Two contexts on the host with their own thread counts: the same results
  // (the kernels are deterministic for any thread count), whatever the
  // calling thread's default.
  const ExecContext one(Device::cpu(), 1), two(Device::cpu(), 2);
  EXPECT_EQ(one.threads(), 1);
  EXPECT_EQ(two.threads(), 2);
  Tensor x = random_tensor({64, 96}, 4), w = random_tensor({96, 32}, 5);
  Tensor y1 = Tensor::empty({64, 32}), y2 = Tensor::empty({64, 32});
  gemm(one, x, w, y1);
  gemm(two, x, w, y2);
  EXPECT_TRUE(weft::testing::close(y1, y2, weft::testing::kF32));
  EXPECT_EQ(sum_of_squares(one, x), sum_of_squares(two, x));
  Tensor d1 = Tensor::empty({64, 96}), d2 = Tensor::empty({64, 96});
  Tensor m1 = Tensor::empty({64, 96}, DType::u8), m2 = Tensor::empty({64, 96}, DType::u8);
  dropout_forward(one, x, 0.3f, 7, 11, d1, m1);
  dropout_forward(two, x, 0.3f, 7, 11, d2, m2);
  EXPECT_EQ(d1.to_vector(), d2.to_vector());
  EXPECT_EQ(m1.to_vector(), m2.to_vector());
}

}  // namespace
}  // namespace weft::kernels
