#include "weft/comm/process_group.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>

#include "weft/comm/detail/host_work.h"
#include "weft/comm/detail/op.h"
#include "weft/core/cuda.h"
#include "weft/core/error.h"

namespace weft::comm {

namespace {

constexpr std::array<std::string_view, kNumOpKinds> kOpNames = {
    "all_gather", "reduce_scatter", "all_reduce", "broadcast", "all_to_all",
    "barrier",    "send",           "recv",       "send_recv"};

const char* begin_of(const Tensor& t) { return static_cast<const char*>(t.raw()); }

bool overlaps(const Tensor& a, const Tensor& b) {
  if (!a.same_storage(b)) return false;
  const char* a0 = begin_of(a);
  const char* b0 = begin_of(b);
  return a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

void check_defined(const char* what, const char* role, const Tensor& t) {
  WEFT_CHECK(t.defined(), "{}: the {} tensor is undefined", what, role);
}

void check_same_dtype(const char* what, const Tensor& out, const Tensor& in) {
  WEFT_CHECK(out.dtype() == in.dtype(), "{}: the output is {} but the input is {}; both must match",
             what, dtype_name(out.dtype()), dtype_name(in.dtype()));
}

// `big` must be `small` with dimension 0 multiplied by n.
void check_scaled_dim0(const char* what, const Tensor& big, const char* big_role,
                       const Tensor& small, const char* small_role, int n) {
  bool ok = small.dim() >= 1 && big.dim() == small.dim() && big.size(0) == small.size(0) * n;
  for (int d = 1; ok && d < small.dim(); ++d) ok = big.size(d) == small.size(d);
  WEFT_CHECK(small.dim() >= 1, "{}: the {} must have at least one dimension (shape {})", what,
             small_role, small.shape());
  WEFT_CHECK(ok,
             "{}: the {} shape {} must be the {} shape {} with dimension 0 multiplied by the "
             "group size {}",
             what, big_role, big.shape(), small_role, small.shape(), n);
  WEFT_CHECK(small.nbytes() * n == big.nbytes(),
             "{}: a chunk of {} {} elements does not fill whole bytes", what, small.numel(),
             dtype_name(small.dtype()));
}

void check_dtype_reducible(const char* what, const Tensor& t, ReduceOp op) {
  const DType d = t.dtype();
  WEFT_CHECK(d == DType::f32 || d == DType::bf16 || d == DType::f64 || d == DType::i64,
             "{}: a {} reduction needs f32 or bf16 tensors (or f64 or i64), got {}", what,
             reduce_op_name(op), dtype_name(d));
}

// The checked operations, shared by the single and the coalesced calls.
detail::Op checked_all_gather(const Tensor& out, const Tensor& in, int rank, int size) {
  const char* what = "all_gather";
  check_defined(what, "output", out);
  check_defined(what, "input", in);
  check_same_dtype(what, out, in);
  check_scaled_dim0(what, out, "output", in, "input", size);
  detail::Op op{.kind = OpKind::all_gather, .in = in, .out = out};
  op.in_place = in.same_storage(out) && begin_of(in) == begin_of(out) + rank * in.nbytes();
  WEFT_CHECK(op.in_place || !overlaps(in, out),
             "all_gather: the input overlaps the output but is not this rank's chunk of it "
             "(out.chunk({})[{}]); use that chunk for an in-place call or separate tensors",
             size, rank);
  return op;
}

detail::Op checked_reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp reduce, int rank,
                                  int size) {
  const char* what = "reduce_scatter";
  check_defined(what, "output", out);
  check_defined(what, "input", in);
  check_same_dtype(what, out, in);
  check_dtype_reducible(what, in, reduce);
  check_scaled_dim0(what, in, "input", out, "output", size);
  detail::Op op{.kind = OpKind::reduce_scatter, .reduce = reduce, .in = in, .out = out};
  op.in_place = in.same_storage(out) && begin_of(out) == begin_of(in) + rank * out.nbytes();
  WEFT_CHECK(op.in_place || !overlaps(in, out),
             "reduce_scatter: the output overlaps the input but is not this rank's chunk of it "
             "(in.chunk({})[{}]); use that chunk for an in-place call or separate tensors",
             size, rank);
  return op;
}

detail::Op checked_all_reduce(const Tensor& out, const Tensor& in, ReduceOp reduce) {
  const char* what = "all_reduce";
  check_defined(what, "output", out);
  check_defined(what, "input", in);
  check_same_dtype(what, out, in);
  check_dtype_reducible(what, in, reduce);
  WEFT_CHECK(out.shape() == in.shape(),
             "all_reduce: the output shape {} differs from the input "
             "shape {}",
             out.shape(), in.shape());
  detail::Op op{.kind = OpKind::all_reduce, .reduce = reduce, .in = in, .out = out};
  op.in_place = in.same_storage(out) && begin_of(in) == begin_of(out);
  WEFT_CHECK(op.in_place || !overlaps(in, out),
             "all_reduce: the output partly overlaps the input; pass the same tensor twice for an "
             "in-place call, or separate tensors");
  return op;
}

}  // namespace

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::avg: return "avg";
    case ReduceOp::max: return "max";
  }
  return "?";
}

ReduceOp parse_reduce_op(std::string_view name) {
  if (name == "sum") return ReduceOp::sum;
  if (name == "avg") return ReduceOp::avg;
  if (name == "max") return ReduceOp::max;
  WEFT_FAIL("unknown reduction '{}'; use sum, avg or max", name);
}

std::string_view op_kind_name(OpKind kind) { return kOpNames[static_cast<size_t>(kind)]; }

OpKind parse_op_kind(std::string_view name) {
  for (size_t i = 0; i < kOpNames.size(); ++i)
    if (kOpNames[i] == name) return static_cast<OpKind>(i);
  WEFT_FAIL(
      "unknown operation '{}'; use all_gather, reduce_scatter, all_reduce, broadcast, "
      "all_to_all, barrier, send, recv or send_recv",
      name);
}

std::string_view comm_event_kind_name(CommEvent::Kind kind) {
  switch (kind) {
    case CommEvent::Kind::issued: return "issued";
    case CommEvent::Kind::wait_begin: return "wait_begin";
    case CommEvent::Kind::wait_end: return "wait_end";
    case CommEvent::Kind::completed: return "completed";
  }
  return "?";
}

bool is_collective(OpKind kind) {
  return kind != OpKind::send && kind != OpKind::recv && kind != OpKind::send_recv;
}

int64_t CommStats::total_calls() const { return std::accumulate(calls.begin(), calls.end(), 0L); }
int64_t CommStats::total_bytes() const { return std::accumulate(bytes.begin(), bytes.end(), 0L); }

std::chrono::milliseconds default_timeout() {
  const char* s = std::getenv("WEFT_COMM_TIMEOUT");
  if (!s || !*s) return std::chrono::seconds(300);
  char* end = nullptr;
  double v = std::strtod(s, &end);
  WEFT_CHECK(end && *end == '\0' && std::isfinite(v) && v > 0,
             "WEFT_COMM_TIMEOUT='{}' is not a positive number of seconds; unset it or give e.g. "
             "600",
             s);
  return std::chrono::milliseconds(std::max<int64_t>(1, std::llround(v * 1000.0)));
}

ProcessGroup::ProcessGroup(std::string name, int rank, int size, std::vector<int> world_ranks)
    : name_(std::move(name)),
      rank_(rank),
      size_(size),
      world_ranks_(std::move(world_ranks)),
      timeout_(default_timeout()),
      observer_(std::make_shared<detail::ObserverSlot>()) {}

ProcessGroup::~ProcessGroup() = default;

void ProcessGroup::set_timeout(std::chrono::milliseconds timeout) {
  WEFT_CHECK(timeout.count() > 0, "the timeout of group '{}' must be positive, got {} ms", name_,
             timeout.count());
  timeout_ = timeout;
}

std::string ProcessGroup::label() const {
  return format("group '{}' (world ranks {})", name_, world_ranks_);
}

CommStats ProcessGroup::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void ProcessGroup::reset_stats() {
  std::lock_guard lock(mu_);
  stats_ = CommStats{};
}

void ProcessGroup::set_observer(CommObserver observer) { observer_->set(std::move(observer)); }

std::shared_ptr<detail::HostWork> ProcessGroup::make_host_work(const detail::Op& op) const {
  return std::make_shared<detail::HostWork>(op.what, op.kind, op.index, rank_, timeout_, observer_);
}

void ProcessGroup::check_peer(const char* what, const char* role, int peer, bool self_ok) const {
  WEFT_CHECK(peer >= 0 && peer < size_, "{} on group '{}': {} rank {} is not in [0, {})", what,
             name_, role, peer, size_);
  WEFT_CHECK(self_ok || peer != rank_, "{} on group '{}': rank {} cannot be its own {}", what,
             name_, peer, role);
}

std::shared_ptr<const Work::Impl> ProcessGroup::submit_to(ProcessGroup& to, detail::Op op) {
  return to.submit(std::move(op));
}

std::string ProcessGroup::unsupported(Device d) const {
  if (d.is_cpu()) return {};
  return format("the {} backend moves host memory only", backend());
}

void ProcessGroup::check_devices(const detail::Op& op) const {
  // Every call passes here: nothing is allocated unless a check fails.
  const bool coalesced = !op.parts_in.empty();
  const Tensor& first = coalesced ? op.parts_in.front() : op.in.defined() ? op.in : op.out;
  if (!first.defined()) return;  // a barrier
  const Device device = first.device();
  const auto on = [&](const Tensor& t) { return !t.defined() || t.device() == device; };
  bool same = on(op.in) && on(op.out);
  for (size_t i = 0; i < op.parts_in.size(); ++i)
    same = same && on(op.parts_in[i]) && on(op.parts_out[i]);
  if (same && unsupported(device).empty()) return;
  const std::string what =
      format("{}{} on group '{}'", op_kind_name(op.kind), coalesced ? "_coalesced" : "", name_);
  if (!same) {
    const bool send = op.kind == OpKind::send || op.kind == OpKind::send_recv;
    const bool recv = op.kind == OpKind::recv || op.kind == OpKind::send_recv;
    std::string where;
    const auto add = [&](const std::string& role, const Tensor& t) {
      if (t.defined()) where += format("{}{} on {}", where.empty() ? "" : ", ", role, t.device());
    };
    add(send ? "send tensor" : "input", op.in);
    add(recv ? "receive tensor" : "output", op.out);
    for (size_t i = 0; i < op.parts_in.size(); ++i) {
      add(format("input {}", i), op.parts_in[i]);
      add(format("output {}", i), op.parts_out[i]);
    }
    WEFT_FAIL("{}: the tensors of one call must be on one device, got {}", what, where);
  }
  WEFT_FAIL("{}: the tensors are on {}, but {}", what, device, unsupported(device));
}

Work ProcessGroup::issue(detail::Op op, int64_t bytes) {
  check_devices(op);
  std::lock_guard issuing(issue_mu_);
  {
    std::lock_guard lock(mu_);
    op.index = issued_++;
    if (is_collective(op.kind)) op.seq = collectives_++;
    size_t k = static_cast<size_t>(op.kind);
    stats_.calls[k] += 1;
    stats_.bytes[k] += bytes;
  }
  const char* suffix = op.parts_in.empty() && op.parts_out.empty() ? "" : "_coalesced";
  op.what = format("{}{} #{} on {}", op_kind_name(op.kind), suffix, op.index, label());
  const cuda::NvtxRange nvtx(op.what);
  // Before submit, so that `completed` (on the worker) cannot come first.
  observer_->emit(CommEvent::Kind::issued, op.kind, op.index, op.what);
  return Work(submit(std::move(op)));
}

Work ProcessGroup::all_gather(const Tensor& out, const Tensor& in) {
  return issue(checked_all_gather(out, in, rank_, size_), out.nbytes());
}

Work ProcessGroup::reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp reduce) {
  return issue(checked_reduce_scatter(out, in, reduce, rank_, size_), in.nbytes());
}

Work ProcessGroup::all_reduce(const Tensor& tensor, ReduceOp reduce) {
  return all_reduce(tensor, tensor, reduce);
}

Work ProcessGroup::all_reduce(const Tensor& out, const Tensor& in, ReduceOp reduce) {
  return issue(checked_all_reduce(out, in, reduce), in.nbytes());
}

Work ProcessGroup::issue_coalesced(OpKind kind, ReduceOp reduce, std::span<const Tensor> outs,
                                   std::span<const Tensor> ins) {
  const std::string what = format("{}_coalesced", op_kind_name(kind));
  WEFT_CHECK(outs.size() == ins.size(), "{}: {} outputs for {} inputs; pass one of each per tensor",
             what, outs.size(), ins.size());
  if (ins.empty()) return Work();
  int64_t bytes = 0;
  for (size_t i = 0; i < ins.size(); ++i) {
    try {
      if (kind == OpKind::all_gather) {
        checked_all_gather(outs[i], ins[i], rank_, size_);
        bytes += outs[i].nbytes();
      } else if (kind == OpKind::reduce_scatter) {
        checked_reduce_scatter(outs[i], ins[i], reduce, rank_, size_);
        bytes += ins[i].nbytes();
      } else {
        checked_all_reduce(outs[i], ins[i], reduce);
        bytes += ins[i].nbytes();
      }
    } catch (const Error& e) {
      WEFT_FAIL("{}, tensor {} of {}: {}", what, i, ins.size(), e.what());
    }
    WEFT_CHECK(ins[i].dtype() == ins[0].dtype(),
               "{}: tensor {} is {} but tensor 0 is {}; a coalesced call takes one dtype", what, i,
               dtype_name(ins[i].dtype()), dtype_name(ins[0].dtype()));
    WEFT_CHECK(ins[i].nbytes() * 8 == ins[i].numel() * dtype_bits(ins[i].dtype()),
               "{}: tensor {} ({} {} elements) does not fill whole bytes", what, i, ins[i].numel(),
               dtype_name(ins[i].dtype()));
  }
  detail::Op op{.kind = kind, .reduce = reduce};
  op.parts_in.assign(ins.begin(), ins.end());
  op.parts_out.assign(outs.begin(), outs.end());
  return issue(std::move(op), bytes);
}

Work ProcessGroup::all_reduce_coalesced(std::span<const Tensor> tensors, ReduceOp reduce) {
  return issue_coalesced(OpKind::all_reduce, reduce, tensors, tensors);
}

Work ProcessGroup::all_gather_coalesced(std::span<const Tensor> outs, std::span<const Tensor> ins) {
  return issue_coalesced(OpKind::all_gather, ReduceOp::sum, outs, ins);
}

Work ProcessGroup::reduce_scatter_coalesced(std::span<const Tensor> outs,
                                            std::span<const Tensor> ins, ReduceOp reduce) {
  return issue_coalesced(OpKind::reduce_scatter, reduce, outs, ins);
}

Work ProcessGroup::broadcast(const Tensor& tensor, int root) {
  return broadcast(tensor, tensor, root);
}

Work ProcessGroup::broadcast(const Tensor& out, const Tensor& in, int root) {
  const char* what = "broadcast";
  check_defined(what, "output", out);
  check_defined(what, "input", in);
  check_same_dtype(what, out, in);
  check_peer(what, "root", root, true);
  WEFT_CHECK(out.shape() == in.shape(),
             "broadcast: the output shape {} differs from the input "
             "shape {}",
             out.shape(), in.shape());
  detail::Op op{.kind = OpKind::broadcast, .in = in, .out = out, .peer = root};
  op.in_place = in.same_storage(out) && begin_of(in) == begin_of(out);
  WEFT_CHECK(op.in_place || !overlaps(in, out),
             "broadcast: the output partly overlaps the input; pass the same tensor twice for an "
             "in-place call, or separate tensors");
  return issue(std::move(op), out.nbytes());
}

Work ProcessGroup::all_to_all(const Tensor& out, const Tensor& in) {
  const char* what = "all_to_all";
  check_defined(what, "output", out);
  check_defined(what, "input", in);
  check_same_dtype(what, out, in);
  WEFT_CHECK(out.shape() == in.shape(),
             "all_to_all: the output shape {} differs from the input "
             "shape {}",
             out.shape(), in.shape());
  WEFT_CHECK(in.dim() >= 1 && in.size(0) % size_ == 0,
             "all_to_all: dimension 0 of the input (shape {}) must split into {} equal chunks",
             in.shape(), size_);
  WEFT_CHECK(in.nbytes() % size_ == 0,
             "all_to_all: a chunk of {} elements does not fill whole "
             "bytes",
             in.numel() / size_);
  detail::Op op{.kind = OpKind::all_to_all, .in = in, .out = out};
  op.in_place = in.same_storage(out) && begin_of(in) == begin_of(out);
  WEFT_CHECK(op.in_place || !overlaps(in, out),
             "all_to_all: the output partly overlaps the input; pass the same tensor twice for an "
             "in-place call, or separate tensors");
  return issue(std::move(op), in.nbytes());
}

Work ProcessGroup::all_to_all(const Tensor& out, const Tensor& in,
                              std::span<const int64_t> out_rows, std::span<const int64_t> in_rows) {
  const char* what = "all_to_all (variable chunks)";
  check_defined(what, "output", out);
  check_defined(what, "input", in);
  check_same_dtype(what, out, in);
  WEFT_CHECK(in.dim() >= 1 && out.dim() == in.dim(),
             "{}: the input (shape {}) and output (shape {}) must have the same number of "
             "dimensions, at least 1",
             what, in.shape(), out.shape());
  for (int d = 1; d < in.dim(); ++d)
    WEFT_CHECK(in.size(d) == out.size(d),
               "{}: the input's rows (shape {}) and the output's (shape {}) differ in size", what,
               in.shape(), out.shape());
  const auto n = static_cast<size_t>(size_);
  WEFT_CHECK(out_rows.size() == n && in_rows.size() == n,
             "{}: {} output and {} input row counts for a group of {}; pass one of each per rank",
             what, out_rows.size(), in_rows.size(), size_);
  const auto checked_sum = [&](std::span<const int64_t> rows, const char* role) {
    int64_t sum = 0;
    for (int64_t r : rows) {
      WEFT_CHECK(r >= 0, "{}: a negative {} row count ({})", what, role, r);
      sum += r;
    }
    return sum;
  };
  WEFT_CHECK(checked_sum(in_rows, "input") == in.size(0),
             "{}: the input row counts sum to {}, but the input has {} rows", what,
             checked_sum(in_rows, "input"), in.size(0));
  WEFT_CHECK(checked_sum(out_rows, "output") == out.size(0),
             "{}: the output row counts sum to {}, but the output has {} rows", what,
             checked_sum(out_rows, "output"), out.size(0));
  WEFT_CHECK(!overlaps(in, out), "{}: the output overlaps the input; pass separate tensors", what);
  int64_t row_elems = 1;
  for (int d = 1; d < in.dim(); ++d) row_elems *= in.size(d);
  WEFT_CHECK(row_elems * dtype_bits(in.dtype()) % 8 == 0,
             "{}: a row of {} {} values does not fill whole bytes", what, row_elems,
             dtype_name(in.dtype()));
  const int64_t row_bytes = row_elems * dtype_bits(in.dtype()) / 8;
  detail::Op op{.kind = OpKind::all_to_all, .in = in, .out = out};
  for (size_t p = 0; p < n; ++p) {
    op.send_bytes.push_back(in_rows[p] * row_bytes);
    op.recv_bytes.push_back(out_rows[p] * row_bytes);
  }
  return issue(std::move(op), in.nbytes());
}

Work ProcessGroup::barrier() { return issue(detail::Op{.kind = OpKind::barrier}, 0); }

Work ProcessGroup::send(const Tensor& tensor, int dst) {
  check_defined("send", "input", tensor);
  check_peer("send", "destination", dst, false);
  return issue(detail::Op{.kind = OpKind::send, .in = tensor, .peer = dst}, tensor.nbytes());
}

Work ProcessGroup::recv(const Tensor& tensor, int src) {
  check_defined("recv", "output", tensor);
  check_peer("recv", "source", src, false);
  return issue(detail::Op{.kind = OpKind::recv, .out = tensor, .src = src}, tensor.nbytes());
}

Work ProcessGroup::send_recv(const Tensor& send_tensor, int dst, const Tensor& recv_tensor,
                             int src) {
  check_defined("send_recv", "send", send_tensor);
  check_defined("send_recv", "receive", recv_tensor);
  check_peer("send_recv", "destination", dst, false);
  check_peer("send_recv", "source", src, false);
  WEFT_CHECK(!overlaps(send_tensor, recv_tensor),
             "send_recv: the send and receive tensors overlap");
  return issue(detail::Op{.kind = OpKind::send_recv,
                          .in = send_tensor,
                          .out = recv_tensor,
                          .peer = dst,
                          .src = src},
               send_tensor.nbytes() + recv_tensor.nbytes());
}

std::shared_ptr<ProcessGroup> ProcessGroup::new_subgroups_by_enumeration(
    const std::vector<std::vector<int>>& rank_lists, const std::string& name) {
  WEFT_CHECK(!name.empty(),
             "new_subgroups_by_enumeration on group '{}': give the sub-groups a "
             "name",
             name_);
  std::vector<int> seen(static_cast<size_t>(size_), -1);
  int color = -1, key = -1;
  for (size_t g = 0; g < rank_lists.size(); ++g) {
    WEFT_CHECK(!rank_lists[g].empty(), "new_subgroups_by_enumeration('{}'): list {} is empty", name,
               g);
    for (size_t i = 0; i < rank_lists[g].size(); ++i) {
      int r = rank_lists[g][i];
      WEFT_CHECK(r >= 0 && r < size_,
                 "new_subgroups_by_enumeration('{}'): rank {} in list {} is not a rank of group "
                 "'{}' (size {})",
                 name, r, g, name_, size_);
      WEFT_CHECK(seen[static_cast<size_t>(r)] < 0,
                 "new_subgroups_by_enumeration('{}'): rank {} appears in list {} and in list {}; "
                 "the lists must be disjoint",
                 name, r, seen[static_cast<size_t>(r)], g);
      seen[static_cast<size_t>(r)] = static_cast<int>(g);
      if (r == rank_) {
        color = static_cast<int>(g);
        key = static_cast<int>(i);
      }
    }
  }
  auto group = split(rank_lists, color, key, name);
  if (group) group->set_timeout(timeout_);
  return group;
}
}  // namespace weft::comm
