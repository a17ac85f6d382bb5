#include "weft/optim/grad_sync.h"

#include <algorithm>
#include <utility>

namespace weft::optim {

namespace {

bool active(const std::shared_ptr<comm::ProcessGroup>& g) { return g && g->size() > 1; }

// The elements of `view` (a view of `base`'s storage) as [first, last) of base's.
std::pair<int64_t, int64_t> range_in(const Tensor& base, const Tensor& view) {
  const auto* b = static_cast<const char*>(base.raw());
  const auto* v = static_cast<const char*>(view.raw());
  const int64_t first = (v - b) / dtype_storage_bytes(base.dtype(), 1);
  return {first, first + view.numel()};
}

// `t` joins the list of its group (one coalesced collective per group).
using PerGroup = std::vector<std::pair<comm::ProcessGroup*, std::vector<Tensor>>>;
void add_to(PerGroup& list, comm::ProcessGroup* group, const Tensor& t) {
  auto it = std::find_if(list.begin(), list.end(), [&](const auto& e) { return e.first == group; });
  if (it == list.end()) it = list.insert(list.end(), {group, {}});
  it->second.push_back(t);
}

void sum_per_group(PerGroup& list) {
  std::vector<comm::Work> works;
  for (auto& [group, grads] : list) works.push_back(group->all_reduce_coalesced(grads));
  comm::wait_all(works);
}

// Elements per bucket are padded to a multiple of this times the group size,
// so that every shard starts 64-byte aligned.
constexpr int64_t kShardAlignment = 16;

}  // namespace

std::vector<BucketShard::Piece> BucketShard::own() const {
  const int64_t lo = shard_begin, hi = shard_begin + shard.numel();
  std::vector<Piece> out;
  for (const Piece& p : pieces) {
    const int64_t first = std::max(lo, p.bucket_offset);
    const int64_t last = std::min(hi, p.bucket_offset + p.length);
    if (first >= last) continue;
    out.push_back({.param = p.param,
                   .param_offset = p.param_offset + first - p.bucket_offset,
                   .bucket_offset = first,
                   .length = last - first});
  }
  return out;
}

void sum_shared_gradients(const std::vector<nn::Parameter*>& params) {
  std::vector<std::pair<comm::ProcessGroup*, std::vector<Tensor>>> partial;
  for (nn::Parameter* p : params) {
    const Tensor rows = nn::common_rows(p->spec, p->grad);
    if (!rows.defined() || !active(p->share_group)) continue;
    auto it = std::find_if(partial.begin(), partial.end(),
                           [&](const auto& e) { return e.first == p->share_group.get(); });
    if (it == partial.end()) it = partial.insert(partial.end(), {p->share_group.get(), {}});
    it->second.push_back(rows);
  }
  std::vector<comm::Work> works;
  for (auto& [group, grads] : partial) works.push_back(group->all_reduce_coalesced(grads));
  comm::wait_all(works);
}

GradSync::GradSync(std::vector<nn::Parameter*> params, std::shared_ptr<comm::ProcessGroup> dp,
                   int64_t bucket_bytes, const ExecContext& ec, bool shard)
    : params_(std::move(params)), dp_(std::move(dp)), shard_(shard) {
  WEFT_CHECK(bucket_bytes > 0, "gradient bucket size must be positive, got {}", bucket_bytes);
  // Group parameters (reverse order) into buckets of about bucket_bytes.
  std::vector<std::vector<nn::Parameter*>> groups;
  int64_t bytes = 0;
  for (auto it = params_.rbegin(); it != params_.rend(); ++it) {
    if (groups.empty() || bytes >= bucket_bytes) {
      groups.emplace_back();
      bytes = 0;
    }
    groups.back().push_back(*it);
    bytes += (*it)->grad.nbytes();
  }
  const int ranks = active(dp_) ? dp_->size() : 1;
  for (auto& group : groups) {
    int64_t n = 0;
    for (nn::Parameter* p : group) n += p->grad.numel();
    if (shard_)
      n = (n + kShardAlignment * ranks - 1) / (kShardAlignment * ranks) * kShardAlignment * ranks;
    Bucket b;
    b.flat = ec.zeros({n}, DType::f32, MemoryTag::grads);
    if (shard_) {
      // The reduce-scatter runs in place: this rank's shard is its chunk of flat.
      const int64_t per_rank = n / ranks;
      const int rank = active(dp_) ? dp_->rank() : 0;
      b.bs.group = active(dp_) ? dp_.get() : nullptr;
      b.bs.flat = b.flat;
      b.bs.shard_begin = per_rank * rank;
      b.bs.shard = b.flat.narrow(b.bs.shard_begin, per_rank);
    }
    int64_t off = 0;
    for (nn::Parameter* p : group) {
      Tensor view = b.flat.narrow(off, p->grad.numel()).reshape(p->grad.shape());
      view.copy_from(p->grad);
      p->grad = view;
      if (shard_) {
        b.bs.pieces.push_back(
            {.param = p, .param_offset = 0, .bucket_offset = off, .length = p->grad.numel()});
      }
      off += p->grad.numel();
      bucket_of_[p] = buckets_.size();
      b.params.push_back(p);
    }
    buckets_.push_back(std::move(b));
  }
}

void GradSync::issue(Bucket& b) {
  if (active(dp_)) {
    b.work = shard_ ? dp_->reduce_scatter(b.bs.shard, b.flat, comm::ReduceOp::avg)
                    : dp_->all_reduce(b.flat, comm::ReduceOp::avg);
  }
  b.issued = true;
}

bool GradSync::summed_after(const nn::Parameter& p) {
  return active(p.grad_sum_group) ||
         (active(p.share_group) && nn::common_rows(p.spec, p.grad).defined());
}

void GradSync::observe_completed(bool wait) {
  if (!observer_) return;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    Bucket& b = buckets_[i];
    if (!b.issued || b.observed) continue;
    if (!b.work.is_completed()) {
      if (!wait) continue;
      b.work.wait();
    }
    b.observed = true;
    observer_->bucket_final(*this, static_cast<int64_t>(i));
  }
}

void GradSync::mark_ready(const nn::Parameter* p) {
  if (!sync_) return;
  auto it = bucket_of_.find(p);
  WEFT_CHECK(it != bucket_of_.end(), "parameter {} is not managed by this gradient sync", p->name);
  bool& marked = ready_[p];
  WEFT_CHECK(!marked, "gradient of {} marked ready twice in one step", p->name);
  marked = true;
  Bucket& b = buckets_[it->second];
  if (++b.ready == static_cast<int64_t>(b.params.size())) {
    issue(b);
    ++issued_early_;
  }
  observe_completed(false);
}

void GradSync::finish() {
  if (!sync_) return;
  // Buckets still pending (their parameters were never marked ready) go
  // together, as one operation.
  // (Sharded: each its own reduce-scatter.)
  std::vector<Tensor> pending;
  for (Bucket& b : buckets_) {
    if (b.issued) continue;
    if (shard_) {
      issue(b);
    } else {
      pending.push_back(b.flat);
    }
  }
  comm::Work rest;
  if (active(dp_) && !shard_) rest = dp_->all_reduce_coalesced(pending, comm::ReduceOp::avg);
  std::vector<comm::Work> works;
  for (Bucket& b : buckets_) works.push_back(b.issued ? b.work : rest);
  comm::wait_all(works);
  // The pending buckets went as one operation: each is complete now.
  for (Bucket& b : buckets_) {
    if (!b.issued) {
      b.issued = true;
      b.work = {};
    }
  }
  observe_completed(true);
  for (Bucket& b : buckets_) {
    b.ready = 0;
    b.issued = false;
    b.observed = false;
    b.work = {};
  }
  for (auto& [param, marked] : ready_) marked = false;
  sum_partial_gradients();
  if (observer_) observer_->partials_final(*this);
  last_issued_early_ = issued_early_;
  issued_early_ = 0;
}

void GradSync::sum_partial_gradients() {
  // Partial sums over the TP group (sequence parallelism): every rank of the
  // group holds a part of the same parameter's gradient. Summing commutes
  // with the DP average, so doing it after is exact. One operation per group.
  PerGroup partial;
  if (!shard_) {
    for (nn::Parameter* p : params_) {
      if (active(p->grad_sum_group)) add_to(partial, p->grad_sum_group.get(), p->grad);
    }
    sum_per_group(partial);
    sum_shared_gradients(params_);
    return;
  }
  // Sharded: the stretches of this rank's shards, in bucket order (the same
  // on every rank of those groups).
  PerGroup shared;
  for (Bucket& b : buckets_) {
    for (const BucketShard::Piece& piece : b.bs.own()) {
      nn::Parameter* p = piece.param;
      const Tensor stretch =
          b.bs.shard.narrow(piece.bucket_offset - b.bs.shard_begin, piece.length);
      if (active(p->grad_sum_group)) add_to(partial, p->grad_sum_group.get(), stretch);
      const Tensor rows = nn::common_rows(p->spec, p->grad);
      if (!rows.defined() || !active(p->share_group)) continue;
      const auto [first, last] = range_in(p->grad, rows);
      const int64_t from = std::max(first, piece.param_offset);
      const int64_t to = std::min(last, piece.param_offset + piece.length);
      if (from < to)
        add_to(shared, p->share_group.get(), stretch.narrow(from - piece.param_offset, to - from));
    }
  }
  sum_per_group(partial);
  sum_per_group(shared);
}

}  // namespace weft::optim
