// The local backend on CUDA tensors: ranks are threads sharing cuda:0. Each
// collective is checked against its known result, and every reduction also
// against the same call on host tensors, bit for bit (random inputs, so that
// the order of the arithmetic shows): the GPU path must return what the CPU
// backend returns.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "cuda_testing.h"
#include "testing.h"
#include "weft/comm/local.h"
#include "weft/core/error.h"

namespace weft::comm {
namespace {

using weft::testing::gpu;
using weft::testing::host;

// A value that f32 and bf16 hold exactly (small integers).
float value(int rank, int64_t i) { return static_cast<float>((rank + 1) + (i % 7)); }

Tensor filled(const Shape& shape, DType dtype, int rank) {
  std::vector<float> v(static_cast<size_t>(shape.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = value(rank, static_cast<int64_t>(i));
  return Tensor::from(shape, v, dtype);
}

// Random f32 or bf16 values of this rank (f64 and i64: values f32 cannot hold).
Tensor random_of(const Shape& shape, DType dtype, int rank) {
  if (dtype == DType::f64 || dtype == DType::i64) {
    Tensor t = Tensor::empty(shape, dtype);
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (dtype == DType::f64) {
        t.data<double>()[i] = 1.0 + std::ldexp(3.0 * rank + static_cast<double>(i % 977), -40);
      } else {
        t.data<int64_t>()[i] = (int64_t{1} << 40) * (rank + 1) - 3 * (i % 501) + rank;
      }
    }
    return t;
  }
  return weft::testing::random_tensor(shape, static_cast<uint32_t>(100 + rank), -1.0f, 1.0f, dtype);
}

// The reduction of value(p, i) over n ranks, in f32 in rank order.
float reduced(ReduceOp op, int n, int64_t i, DType dtype) {
  float acc = value(0, i);
  for (int p = 1; p < n; ++p)
    acc = op == ReduceOp::max ? std::max(acc, value(p, i)) : acc + value(p, i);
  if (op == ReduceOp::avg) acc /= static_cast<float>(n);
  return dtype == DType::bf16 ? round_to_bf16(acc) : acc;
}

::testing::AssertionResult on_gpu_with(const Tensor& t, const std::vector<float>& want) {
  if (!t.device().is_cuda())
    return ::testing::AssertionFailure() << "on " << format("{}", t.device());
  const std::vector<float> got = t.to_vector();
  if (got == want) return ::testing::AssertionSuccess();
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if (got[i] != want[i])
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << got[i] << ", want " << want[i];
  }
  return ::testing::AssertionFailure() << got.size() << " elements, want " << want.size();
}

// The same bytes, whatever the devices.
::testing::AssertionResult same_bytes(const Tensor& a, const Tensor& b) {
  const Tensor ha = host(a), hb = host(b);
  if (ha.nbytes() != hb.nbytes()) return ::testing::AssertionFailure() << "sizes differ";
  if (std::memcmp(ha.raw(), hb.raw(), static_cast<size_t>(ha.nbytes())) == 0)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "the GPU result differs from the CPU backend's";
}

void run(int n, const std::function<void(ProcessGroup&)>& fn) {
  run_local(n, [&](ProcessGroup& g) {
    g.set_timeout(std::chrono::seconds(60));
    fn(g);
  });
}

class CudaLocalCollectives : public ::testing::TestWithParam<int> {};

TEST_P(CudaLocalCollectives, AllGather) {
  WEFT_REQUIRE_GPU();
  run(GetParam(), [](ProcessGroup& g) {
    const int n = g.size(), me = g.rank();
    for (DType dtype : {DType::f32, DType::bf16}) {
      for (bool in_place : {false, true}) {
        Tensor out = gpu(Tensor::zeros({3 * n, 5}, dtype));
        Tensor in =
            in_place ? out.chunk(n)[static_cast<size_t>(me)] : gpu(filled({3, 5}, dtype, me));
        if (in_place) in.copy_from(filled({3, 5}, dtype, me));
        g.all_gather(out, in).wait();
        std::vector<float> want;
        for (int p = 0; p < n; ++p)
          for (int64_t i = 0; i < 15; ++i) want.push_back(value(p, i));
        EXPECT_TRUE(on_gpu_with(out, want)) << dtype_name(dtype) << " in place " << in_place;
      }
    }
  });
}

TEST_P(CudaLocalCollectives, ReduceScatter) {
  WEFT_REQUIRE_GPU();
  run(GetParam(), [](ProcessGroup& g) {
    const int n = g.size(), me = g.rank();
    for (DType dtype : {DType::f32, DType::bf16}) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
        SCOPED_TRACE(format("{} {}", dtype_name(dtype), reduce_op_name(op)));
        for (bool in_place : {false, true}) {
          const int64_t rows = 4, cols = 3, count = rows * cols;
          Tensor in = gpu(filled({rows * n, cols}, dtype, me));
          Tensor out = in_place ? in.chunk(n)[static_cast<size_t>(me)]
                                : gpu(Tensor::zeros({rows, cols}, dtype));
          g.reduce_scatter(out, in, op).wait();
          std::vector<float> want;
          for (int64_t i = 0; i < count; ++i) want.push_back(reduced(op, n, me * count + i, dtype));
          EXPECT_TRUE(on_gpu_with(out, want)) << "in place " << in_place;
        }
        Tensor in = random_of({257 * n, 3}, dtype, me);
        Tensor want = Tensor::zeros({257, 3}, dtype), got = gpu(want);
        g.reduce_scatter(want, in, op).wait();
        g.reduce_scatter(got, gpu(in), op).wait();
        EXPECT_TRUE(same_bytes(got, want));
      }
    }
  });
}

TEST_P(CudaLocalCollectives, AllReduce) {
  WEFT_REQUIRE_GPU();
  run(GetParam(), [](ProcessGroup& g) {
    const int n = g.size(), me = g.rank();
    for (DType dtype : {DType::f32, DType::bf16}) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
        for (int64_t count : {int64_t{1}, int64_t{7}, int64_t{1000}}) {
          SCOPED_TRACE(format("{} {} count {}", dtype_name(dtype), reduce_op_name(op), count));
          for (bool in_place : {false, true}) {
            Tensor in = gpu(filled({count}, dtype, me));
            Tensor out = in_place ? in : gpu(Tensor::zeros({count}, dtype));
            g.all_reduce(out, in, op).wait();
            std::vector<float> want;
            for (int64_t i = 0; i < count; ++i) want.push_back(reduced(op, n, i, dtype));
            EXPECT_TRUE(on_gpu_with(out, want)) << "in place " << in_place;
          }
        }
      }
    }
  });
}

// Random inputs, every reducible dtype, sizes that split unevenly over the
// ranks and one past the CPU's 4 MiB streaming threshold: the bits of the CPU backend.
TEST_P(CudaLocalCollectives, AllReduceMatchesTheCpuBackend) {
  WEFT_REQUIRE_GPU();
  run(GetParam(), [](ProcessGroup& g) {
    for (DType dtype : {DType::f32, DType::bf16, DType::f64, DType::i64}) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
        for (int64_t count : {int64_t{5}, int64_t{4099}, (int64_t{4} << 20) / 4 + 3}) {
          SCOPED_TRACE(format("{} {} count {}", dtype_name(dtype), reduce_op_name(op), count));
          Tensor in = random_of({count}, dtype, g.rank());
          Tensor want = in.clone(), got = gpu(in);
          g.all_reduce(want, op).wait();
          g.all_reduce(got, op).wait();
          EXPECT_TRUE(same_bytes(got, want));
        }
      }
    }
  });
}

TEST_P(CudaLocalCollectives, Broadcast) {
  WEFT_REQUIRE_GPU();
  run(GetParam(), [](ProcessGroup& g) {
    const int n = g.size(), me = g.rank();
    for (int root = 0; root < n; ++root) {
      for (DType dtype : {DType::f32, DType::bf16}) {
        std::vector<float> want;
        for (int64_t i = 0; i < 10; ++i) want.push_back(value(root, i));
        Tensor t = gpu(me == root ? filled({5, 2}, dtype, root) : Tensor::zeros({5, 2}, dtype));
        g.broadcast(t, root).wait();
        EXPECT_TRUE(on_gpu_with(t, want)) << "in place, root " << root;
        Tensor in = gpu(filled({5, 2}, dtype, me)), out = gpu(Tensor::zeros({5, 2}, dtype));
        g.broadcast(out, in, root).wait();
        EXPECT_TRUE(on_gpu_with(out, want)) << "root " << root;
      }
    }
  });
}

TEST_P(CudaLocalCollectives, SendRecv) {
  WEFT_REQUIRE_GPU();
  run(GetParam(), [](ProcessGroup& g) {
    const int n = g.size(), me = g.rank();
    Tensor send = gpu(filled({64}, DType::f32, me)), recv = gpu(Tensor::zeros({64}));
    g.send_recv(send, (me + 1) % n, recv, (me + n - 1) % n).wait();
    std::vector<float> want;
    for (int64_t i = 0; i < 64; ++i) want.push_back(value((me + n - 1) % n, i));
    EXPECT_TRUE(on_gpu_with(recv, want)) << "send_recv ring";
    // Pairs: even ranks send twice, odd ranks receive twice, in order.
    if (me % 2 == 0) {
      Work a = g.send(gpu(filled({8}, DType::bf16, me)), me + 1);
      Work b = g.send(gpu(filled({8}, DType::bf16, me + 50)), me + 1);
      a.wait();
      b.wait();
    } else {
      Tensor first = gpu(Tensor::zeros({8}, DType::bf16));
      Tensor second = gpu(Tensor::zeros({8}, DType::bf16));
      Work a = g.recv(first, me - 1);
      Work b = g.recv(second, me - 1);
      a.wait();
      b.wait();
      std::vector<float> w1, w2;
      for (int64_t i = 0; i < 8; ++i) {
        w1.push_back(value(me - 1, i));
        w2.push_back(value(me + 49, i));
      }
      EXPECT_TRUE(on_gpu_with(first, w1));
      EXPECT_TRUE(on_gpu_with(second, w2));
    }
    g.barrier().wait();
  });
}

TEST_P(CudaLocalCollectives, AllToAll) {
  WEFT_REQUIRE_GPU();
  run(GetParam(), [](ProcessGroup& g) {
    const int n = g.size(), me = g.rank();
    for (DType dtype : {DType::f32, DType::bf16}) {
      for (bool in_place : {false, true}) {
        // Element j of chunk p on rank q is 100 * q + 10 * p + j (exact in bf16 below 256).
        std::vector<float> v, want;
        for (int p = 0; p < n; ++p) {
          for (int j = 0; j < 6; ++j) {
            v.push_back(static_cast<float>(dtype == DType::bf16 ? 40 * me + 8 * p + j
                                                                : 100 * me + 10 * p + j));
            want.push_back(static_cast<float>(dtype == DType::bf16 ? 40 * p + 8 * me + j
                                                                   : 100 * p + 10 * me + j));
          }
        }
        Tensor in = gpu(Tensor::from({2 * n, 3}, v, dtype));
        Tensor out = in_place ? in : gpu(Tensor::zeros({2 * n, 3}, dtype));
        g.all_to_all(out, in).wait();
        EXPECT_TRUE(on_gpu_with(out, want)) << dtype_name(dtype) << " in place " << in_place;
      }
    }
  });
}

TEST_P(CudaLocalCollectives, Coalesced) {
  WEFT_REQUIRE_GPU();
  run(GetParam(), [](ProcessGroup& g) {
    const int n = g.size(), me = g.rank();
    const int64_t sizes[] = {3, 16, 1};  // rows per rank
    for (DType dtype : {DType::f32, DType::bf16}) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
        SCOPED_TRACE(format("{} {}", dtype_name(dtype), reduce_op_name(op)));
        std::vector<Tensor> host_ts, ts;
        for (int64_t rows : sizes) {
          host_ts.push_back(random_of({rows * n, 2}, dtype, me + 7 * static_cast<int>(rows)));
          ts.push_back(gpu(host_ts.back()));
        }
        std::vector<Tensor> host_outs, outs;
        for (int64_t rows : sizes) {
          host_outs.push_back(Tensor::zeros({rows, 2}, dtype));
          outs.push_back(gpu(host_outs.back()));
        }
        g.reduce_scatter_coalesced(host_outs, host_ts, op).wait();
        g.reduce_scatter_coalesced(outs, ts, op).wait();
        for (size_t k = 0; k < outs.size(); ++k)
          EXPECT_TRUE(same_bytes(outs[k], host_outs[k])) << "reduce_scatter tensor " << k;
        g.all_reduce_coalesced(host_ts, op).wait();
        g.all_reduce_coalesced(ts, op).wait();
        for (size_t k = 0; k < ts.size(); ++k)
          EXPECT_TRUE(same_bytes(ts[k], host_ts[k])) << "all_reduce tensor " << k;
      }
      std::vector<Tensor> ins, outs;
      for (int64_t rows : sizes) {
        ins.push_back(gpu(filled({rows, 2}, dtype, me)));
        outs.push_back(gpu(Tensor::zeros({rows * n, 2}, dtype)));
      }
      g.all_gather_coalesced(outs, ins).wait();
      for (size_t k = 0; k < outs.size(); ++k) {
        std::vector<float> want;
        for (int p = 0; p < n; ++p)
          for (int64_t i = 0; i < sizes[k] * 2; ++i) want.push_back(value(p, i));
        EXPECT_TRUE(on_gpu_with(outs[k], want)) << "all_gather " << dtype_name(dtype) << " " << k;
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Worlds, CudaLocalCollectives, ::testing::Values(2, 4),
                         [](const auto& p) { return "world" + std::to_string(p.param); });

// One call with tensors on two devices fails on the calling thread, naming
// the operation and both devices.
TEST(CudaLocalErrors, MixedDevicesInOneCall) {
  WEFT_REQUIRE_GPU();
  run(2, [](ProcessGroup& g) {
    Tensor h = Tensor::zeros({4}), d = gpu(Tensor::zeros({4}));
    const std::string e = weft::testing::error_of([&] { g.all_reduce(d, h).wait(); });
    EXPECT_NE(e.find("all_reduce"), std::string::npos) << e;
    EXPECT_NE(e.find("cuda:0"), std::string::npos) << e;
    EXPECT_NE(e.find("cpu"), std::string::npos) << e;
    const std::vector<Tensor> parts = {h, d};
    const std::string c = weft::testing::error_of([&] { g.all_reduce_coalesced(parts).wait(); });
    EXPECT_NE(c.find("all_reduce_coalesced"), std::string::npos) << c;
    g.barrier().wait();
  });
}

// Ranks that pass tensors on different devices disagree about the operation:
// every rank fails, and the message says which rank had which device.
TEST(CudaLocalErrors, RanksOnDifferentDevices) {
  WEFT_REQUIRE_GPU();
  try {
    run(2, [](ProcessGroup& g) {
      Tensor t = Tensor::zeros({4});
      if (g.rank() == 1) t = gpu(t);
      g.all_reduce(t).wait();
    });
    ADD_FAILURE() << "run_local did not throw";
  } catch (const Error& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("disagree"), std::string::npos) << text;
    EXPECT_NE(text.find("on cuda:0"), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace weft::comm
