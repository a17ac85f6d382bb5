// weft bench attention --cp N: context-parallel attention (parallel/context/)
// at total length T on N rank threads against the single-rank kernels at T,
// measured in the same run, with how far their results lie apart.
#include "attention_cp.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "timing.h"
#include "weft/comm/local.h"
#include "weft/core/threads.h"
#include "weft/kernels/random.h"
#include "weft/parallel/context/attention.h"

namespace weft::bench {

namespace {

// The rows of a (B, T, w) tensor at a rank's positions: (B, 2c, w).
Tensor local_rows_of(const Tensor& full, const parallel::context::SequenceChunks& ch) {
  const int64_t B = full.size(0), w = full.size(2), T = ch.local();
  const int64_t es = full.dtype() == DType::f32 ? 4 : 2;
  Tensor out = Tensor::empty({B, T, w}, full.dtype());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      std::memcpy(
          static_cast<char*>(out.raw()) + (b * T + t) * w * es,
          static_cast<const char*>(full.raw()) + (b * ch.sequence + ch.position(t)) * w * es,
          static_cast<size_t>(w * es));
  return out;
}

// max |a - b| / max |b|.
double apart(const Tensor& a, const Tensor& b) {
  const Tensor x = a.to(DType::f32), y = b.to(DType::f32);
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    diff = std::max(diff, std::abs(double(x.data<float>()[i]) - y.data<float>()[i]));
    scale = std::max(scale, std::abs(double(y.data<float>()[i])));
  }
  return diff / std::max(scale, 1e-300);
}

}  // namespace

void context_parallel_attention(const AttentionCpOptions& o) {
  const int64_t T = o.seq, B = o.batch, H = o.heads, D = o.head_dim, C = H * D;
  parallel::context::check_sequence(T, o.cp);
  const ExecContext& ec = ExecContext::host();
  kernels::AttentionConfig cfg{.heads = H, .dropout = o.dropout, .seed = 1};
  auto random = [&](Shape shape, uint64_t seed) {
    Tensor u = Tensor::empty({shape.numel()});
    kernels::fill_uniform(ec, seed, 0, u);
    return u.to(o.dtype).reshape(shape);
  };
  const Tensor qkv = random({B, T, 3 * C}, 11), dout = random({B, T, C}, 12);

  // The single rank at T, on every core.
  Tensor out = Tensor::empty({B, T, C}, o.dtype), dqkv = Tensor::empty({B, T, 3 * C}, o.dtype);
  kernels::AttentionSaved saved;
  kernels::AttentionWorkspace ws;
  auto whole = [&] {
    kernels::attention_forward(ec, qkv, cfg, out, saved, ws);
    kernels::attention_backward(ec, dout, qkv, saved, cfg, dqkv, ws);
  };
  whole();  // untimed: primitive creation, first touch
  std::vector<double> single;
  for (int r = 0; r < o.rounds; ++r) single.push_back(seconds(whole));
  const double single_s = upper_median(single);

  // N rank threads sharing the cores, each with its chunks.
  struct Rank {
    double s = 0, wait_share = 0, out_apart = 0, dqkv_apart = 0;
  };
  std::vector<Rank> ranks(static_cast<size_t>(o.cp));
  std::mutex mu;
  const int threads = std::max(1, available_cores() / o.cp);
  comm::run_local(o.cp, [&](comm::ProcessGroup& g) {
    set_num_threads(threads);
    const parallel::context::SequenceChunks ch{T, g.size(), g.rank()};
    const Tensor lq = local_rows_of(qkv, ch), ld = local_rows_of(dout, ch);
    Tensor lout = Tensor::empty({B, ch.local(), C}, o.dtype),
           ldq = Tensor::empty(lq.shape(), o.dtype);
    parallel::context::AttentionSaved s;
    kernels::AttentionWorkspace lws;
    std::vector<double> times;
    parallel::context::AttentionTimes spent;
    auto step = [&] {
      parallel::context::attention_forward(ec, g, o.comm, ch, lq, cfg, lout, s, lws, &spent);
      parallel::context::attention_backward(ec, g, o.comm, ch, ld, s, ldq, lws, &spent);
    };
    step();  // untimed, as the single rank's first call
    spent = {};
    for (int r = 0; r < o.rounds; ++r) {
      g.barrier().wait();
      times.push_back(seconds(step));
    }
    const Rank mine{upper_median(times), spent.wait_s / std::max(spent.attention_s, 1e-300),
                    apart(lout, local_rows_of(out, ch)), apart(ldq, local_rows_of(dqkv, ch))};
    const std::lock_guard<std::mutex> lock(mu);
    ranks[static_cast<size_t>(g.rank())] = mine;
  });

  std::printf("attention %s B=%lld T=%lld H=%lld D=%lld dropout=%g, forward + backward:\n",
              std::string(dtype_name(o.dtype)).c_str(), static_cast<long long>(B),
              static_cast<long long>(T), static_cast<long long>(H), static_cast<long long>(D),
              static_cast<double>(o.dropout));
  std::printf("%-22s %10s %9s %10s %12s %12s\n", "layout", "ms", "exposed", "vs single",
              "out apart", "dqkv apart");
  std::printf("%-22s %10.3f %9s %10s %12s %12s\n", "single rank", 1e3 * single_s, "-", "1.00x", "-",
              "-");
  for (int r = 0; r < o.cp; ++r) {
    const Rank& k = ranks[static_cast<size_t>(r)];
    std::printf(
        "%-22s %10.3f %8.1f%% %9.2fx %12.1e %12.1e\n",
        format("cp {} {} rank {}", o.cp, parallel::context::cp_comm_name(o.comm), r).c_str(),
        1e3 * k.s, 100 * k.wait_share, single_s / k.s, k.out_apart, k.dqkv_apart);
  }
  std::printf(
      "(cp ranks are %d threads each of this machine's %d cores; exposed: the share of a rank's\n"
      " attention time spent waiting for the exchange; apart: max |cp - single| / max |single|)\n",
      threads, available_cores());
}

}  // namespace weft::bench
