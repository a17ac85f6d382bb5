#include "weft/nn/moe_exchange.h"

#include "weft/core/profile.h"

namespace weft::nn {

namespace {

// Times the exchange as profile::Category::all_to_all; the waits inside it,
// which the groups count as comm, are taken out of comm.
class Timed {
 public:
  Timed() : comm_(profile::totals().comm) {}
  ~Timed() { profile::add(profile::Category::comm, comm_ - profile::totals().comm); }
  Timed(const Timed&) = delete;
  Timed& operator=(const Timed&) = delete;

 private:
  double comm_;
  profile::Scope scope_{profile::Category::all_to_all};
};

int64_t sum(std::span<const int64_t> v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}

// Copies row blocks of `src` into `dst`: block (a, b) of an A × B grid, laid
// out a-major in src, goes b-major into dst (rows[a·B + b] rows each).
void transpose_blocks(const Tensor& src, Tensor& dst, const std::vector<int64_t>& rows, int64_t a,
                      int64_t b) {
  std::vector<int64_t> src_at(rows.size() + 1, 0), dst_at(rows.size(), 0);
  for (size_t i = 0; i < rows.size(); ++i) src_at[i + 1] = src_at[i] + rows[i];
  int64_t at = 0;
  for (int64_t j = 0; j < b; ++j) {
    for (int64_t i = 0; i < a; ++i) {
      dst_at[static_cast<size_t>(i * b + j)] = at;
      at += rows[static_cast<size_t>(i * b + j)];
    }
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] == 0) continue;
    Tensor to = dst.rows(dst_at[i], rows[i]);
    to.copy_from(src.rows(src_at[i], rows[i]));
  }
}

// The (B, A) transpose of an (A, B) grid of counts, row-major.
std::vector<int64_t> transposed(const std::vector<int64_t>& v, int64_t a, int64_t b) {
  std::vector<int64_t> out(v.size());
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      out[static_cast<size_t>(j * a + i)] = v[static_cast<size_t>(i * b + j)];
  return out;
}

}  // namespace

ExpertExchange plan_exchange(const ExecContext& ec, comm::ProcessGroup& ep,
                             std::span<const int64_t> counts) {
  const Timed timed;
  const int64_t p = ep.size();
  const auto experts = static_cast<int64_t>(counts.size());
  WEFT_CHECK(experts % p == 0, "{} experts do not split over the {} ranks of group '{}'", experts,
             p, ep.name());
  ExpertExchange plan{.ranks = p, .local_experts = experts / p};
  std::vector<int32_t> mine(counts.begin(), counts.end());
  for (int64_t c : counts)
    WEFT_CHECK(c >= 0 && c <= INT32_MAX, "an expert count of {} is out of range", c);
  const Tensor send = Tensor::from_i32({experts}, mine).to(ec.device());
  Tensor recv = ec.empty({experts}, DType::i32, MemoryTag::comm);
  ep.all_to_all(recv, send).wait(ec);
  const Tensor got = recv.to(Device::cpu());
  const int32_t* g = got.data<int32_t>();
  plan.from.assign(g, g + experts);
  plan.local_counts.assign(static_cast<size_t>(plan.local_experts), 0);
  for (int64_t q = 0; q < p; ++q) {
    const auto at = static_cast<size_t>(q * plan.local_experts);
    plan.send_rows.push_back(sum(counts.subspan(at, static_cast<size_t>(plan.local_experts))));
    plan.recv_rows.push_back(sum(
        std::span<const int64_t>(plan.from).subspan(at, static_cast<size_t>(plan.local_experts))));
    for (int64_t e = 0; e < plan.local_experts; ++e)
      plan.local_counts[static_cast<size_t>(e)] += plan.from[at + static_cast<size_t>(e)];
  }
  return plan;
}

Tensor exchange_forward(const ExecContext& ec, comm::ProcessGroup& ep, const ExpertExchange& plan,
                        const Tensor& xp) {
  const Timed timed;
  WEFT_CHECK(xp.dim() == 2 && xp.size(0) == sum(plan.send_rows),
             "expert exchange: {} rows to send, the plan says {}", xp.size(0), sum(plan.send_rows));
  const int64_t m = sum(plan.recv_rows);
  Tensor by_source = ec.empty({m, xp.size(1)}, xp.dtype(), MemoryTag::activations);
  ep.all_to_all(by_source, xp, plan.recv_rows, plan.send_rows).wait(ec);
  Tensor by_expert = ec.empty({m, xp.size(1)}, xp.dtype(), MemoryTag::activations);
  transpose_blocks(by_source, by_expert, plan.from, plan.ranks, plan.local_experts);
  return by_expert;
}

Tensor exchange_back(const ExecContext& ec, comm::ProcessGroup& ep, const ExpertExchange& plan,
                     const Tensor& y) {
  const Timed timed;
  const int64_t m = sum(plan.recv_rows);
  WEFT_CHECK(y.dim() == 2 && y.size(0) == m, "expert exchange: {} rows to return, the plan says {}",
             y.size(0), m);
  Tensor by_source = ec.empty({m, y.size(1)}, y.dtype(), MemoryTag::activations);
  transpose_blocks(y, by_source, transposed(plan.from, plan.ranks, plan.local_experts),
                   plan.local_experts, plan.ranks);
  Tensor out = ec.empty({sum(plan.send_rows), y.size(1)}, y.dtype(), MemoryTag::activations);
  ep.all_to_all(out, by_source, plan.send_rows, plan.recv_rows).wait(ec);
  return out;
}

}  // namespace weft::nn
