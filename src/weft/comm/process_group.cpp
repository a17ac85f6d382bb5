#include "weft/comm/process_group.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>

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

void check_defined_cpu(const char* what, const char* role, const Tensor& t) {
  WEFT_CHECK(t.defined(), "{}: the {} tensor is undefined", what, role);
  WEFT_CHECK(t.device().is_cpu(),
             "{}: the {} tensor is on {}; the local and mpi backends move "
             "host memory only",
             what, role, t.device());
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
      timeout_(default_timeout()) {}

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

void ProcessGroup::check_dtype_reducible(const char* what, const Tensor& t, ReduceOp op) const {
  WEFT_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::bf16,
             "{}: a {} reduction needs f32 or bf16 tensors, got {}", what, reduce_op_name(op),
             dtype_name(t.dtype()));
}

void ProcessGroup::check_peer(const char* what, const char* role, int peer, bool self_ok) const {
  WEFT_CHECK(peer >= 0 && peer < size_, "{} on group '{}': {} rank {} is not in [0, {})", what,
             name_, role, peer, size_);
  WEFT_CHECK(self_ok || peer != rank_, "{} on group '{}': rank {} cannot be its own {}", what,
             name_, peer, role);
}

Work ProcessGroup::issue(detail::Op op, int64_t bytes) {
  auto state = std::make_shared<detail::WorkState>();
  std::lock_guard lock(mu_);
  op.index = issued_++;
  if (is_collective(op.kind)) op.seq = collectives_++;
  op.what = format("{} #{} on {}", op_kind_name(op.kind), op.index, label());
  size_t k = static_cast<size_t>(op.kind);
  stats_.calls[k] += 1;
  stats_.bytes[k] += bytes;
  state->what = op.what;
  state->rank = rank_;
  state->group_timeout = timeout_;
  state->keep_in = op.in;
  state->keep_out = op.out;
  submit(std::move(op), state);
  return Work(std::move(state));
}

Work ProcessGroup::all_gather(const Tensor& out, const Tensor& in) {
  const char* what = "all_gather";
  check_defined_cpu(what, "output", out);
  check_defined_cpu(what, "input", in);
  check_same_dtype(what, out, in);
  check_scaled_dim0(what, out, "output", in, "input", size_);
  detail::Op op{.kind = OpKind::all_gather, .in = in, .out = out};
  op.in_place = in.same_storage(out) && begin_of(in) == begin_of(out) + rank_ * in.nbytes();
  WEFT_CHECK(op.in_place || !overlaps(in, out),
             "all_gather: the input overlaps the output but is not this rank's chunk of it "
             "(out.chunk({})[{}]); use that chunk for an in-place call or separate tensors",
             size_, rank_);
  return issue(std::move(op), out.nbytes());
}

Work ProcessGroup::reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp reduce) {
  const char* what = "reduce_scatter";
  check_defined_cpu(what, "output", out);
  check_defined_cpu(what, "input", in);
  check_same_dtype(what, out, in);
  check_dtype_reducible(what, in, reduce);
  check_scaled_dim0(what, in, "input", out, "output", size_);
  detail::Op op{.kind = OpKind::reduce_scatter, .reduce = reduce, .in = in, .out = out};
  op.in_place = in.same_storage(out) && begin_of(out) == begin_of(in) + rank_ * out.nbytes();
  WEFT_CHECK(op.in_place || !overlaps(in, out),
             "reduce_scatter: the output overlaps the input but is not this rank's chunk of it "
             "(in.chunk({})[{}]); use that chunk for an in-place call or separate tensors",
             size_, rank_);
  return issue(std::move(op), in.nbytes());
}

Work ProcessGroup::all_reduce(const Tensor& tensor, ReduceOp reduce) {
  return all_reduce(tensor, tensor, reduce);
}

Work ProcessGroup::all_reduce(const Tensor& out, const Tensor& in, ReduceOp reduce) {
  const char* what = "all_reduce";
  check_defined_cpu(what, "output", out);
  check_defined_cpu(what, "input", in);
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
  return issue(std::move(op), in.nbytes());
}

Work ProcessGroup::broadcast(const Tensor& tensor, int root) {
  return broadcast(tensor, tensor, root);
}

Work ProcessGroup::broadcast(const Tensor& out, const Tensor& in, int root) {
  const char* what = "broadcast";
  check_defined_cpu(what, "output", out);
  check_defined_cpu(what, "input", in);
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
  check_defined_cpu(what, "output", out);
  check_defined_cpu(what, "input", in);
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

Work ProcessGroup::barrier() { return issue(detail::Op{.kind = OpKind::barrier}, 0); }

Work ProcessGroup::send(const Tensor& tensor, int dst) {
  check_defined_cpu("send", "input", tensor);
  check_peer("send", "destination", dst, false);
  return issue(detail::Op{.kind = OpKind::send, .in = tensor, .peer = dst}, tensor.nbytes());
}

Work ProcessGroup::recv(const Tensor& tensor, int src) {
  check_defined_cpu("recv", "output", tensor);
  check_peer("recv", "source", src, false);
  return issue(detail::Op{.kind = OpKind::recv, .out = tensor, .src = src}, tensor.nbytes());
}

Work ProcessGroup::send_recv(const Tensor& send_tensor, int dst, const Tensor& recv_tensor,
                             int src) {
  check_defined_cpu("send_recv", "send", send_tensor);
  check_defined_cpu("send_recv", "receive", recv_tensor);
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

std::string detail::ranks_str(const std::vector<int>& ranks, const std::vector<int>& world_ranks) {
  std::vector<int> w;
  for (int r : ranks) w.push_back(world_ranks[static_cast<size_t>(r)]);
  return w == ranks ? format("{}", ranks) : format("{} (world ranks {})", ranks, w);
}

}  // namespace weft::comm
