// Expert parallelism's token exchange: between dispatch (nn/moe_dispatch.h)
// and the experts, every rank of the ep group sends each peer the rows routed
// to that peer's experts, and the experts' outputs travel back the same way.
//
//   plan      counts (E: rows per global expert, this rank's dispatch order)
//             -> one all_to_all of the counts (E/P per peer): what every peer
//             sends this rank for each of its local experts
//   forward   xp (M, C), grouped by global expert
//             -> all_to_all with variable chunks -> rows grouped by source
//             rank, then local expert -> regrouped by local expert, then
//             source rank: (M', C), local_counts[e] rows for local expert e,
//             what GroupedLinear takes
//   back      the inverse: (M', C) grouped by local expert -> (M, C) in
//             xp's order
//
// The experts' backward runs the same two calls on the gradients: forward
// carries the combine's gradient to the experts, back returns the inputs'
// gradient to dispatch_backward. The row order within a (source, expert)
// block is the source's dispatch order, so every run is bitwise reproducible.
// The exchange's time (waits included) is profile::Category::all_to_all.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "weft/comm/process_group.h"
#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"

namespace weft::nn {

struct ExpertExchange {
  int64_t ranks = 1, local_experts = 0;
  std::vector<int64_t> send_rows{};     // (P): rows this rank sends each peer
  std::vector<int64_t> recv_rows{};     // (P): rows it receives from each peer
  std::vector<int64_t> from{};          // (P, local experts): rows from peer p for expert e
  std::vector<int64_t> local_counts{};  // (local experts): rows each local expert takes
};

// Collective over `ep`: exchanges the counts (E = ep.size() · local experts).
ExpertExchange plan_exchange(const ExecContext& ec, comm::ProcessGroup& ep,
                             std::span<const int64_t> counts);
// xp (M, C) in dispatch order -> (Σ local_counts, C) grouped by local expert.
Tensor exchange_forward(const ExecContext& ec, comm::ProcessGroup& ep, const ExpertExchange& plan,
                        const Tensor& xp);
// y (Σ local_counts, C) grouped by local expert -> (M, C) in dispatch order.
Tensor exchange_back(const ExecContext& ec, comm::ProcessGroup& ep, const ExpertExchange& plan,
                     const Tensor& y);

}  // namespace weft::nn
