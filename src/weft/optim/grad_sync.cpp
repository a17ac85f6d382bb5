#include "weft/optim/grad_sync.h"

#include <algorithm>
#include <utility>

namespace weft::optim {

namespace {
bool active(const std::shared_ptr<comm::ProcessGroup>& g) { return g && g->size() > 1; }
}  // namespace

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
                   int64_t bucket_bytes, const ExecContext& ec)
    : params_(std::move(params)), dp_(std::move(dp)) {
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
  for (auto& group : groups) {
    int64_t n = 0;
    for (nn::Parameter* p : group) n += p->grad.numel();
    Bucket b;
    b.flat = ec.zeros({n}, DType::f32, MemoryTag::grads);
    int64_t off = 0;
    for (nn::Parameter* p : group) {
      Tensor view = b.flat.narrow(off, p->grad.numel()).reshape(p->grad.shape());
      view.copy_from(p->grad);
      p->grad = view;
      off += p->grad.numel();
      bucket_of_[p] = buckets_.size();
      b.params.push_back(p);
    }
    buckets_.push_back(std::move(b));
  }
}

void GradSync::issue(Bucket& b) {
  if (active(dp_)) b.work = dp_->all_reduce(b.flat, comm::ReduceOp::avg);
  b.issued = true;
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
}

void GradSync::finish() {
  if (!sync_) return;
  // Buckets still pending (their parameters were never marked ready) go
  // together, as one operation.
  std::vector<Tensor> pending;
  for (Bucket& b : buckets_) {
    if (!b.issued) pending.push_back(b.flat);
  }
  comm::Work rest;
  if (active(dp_)) rest = dp_->all_reduce_coalesced(pending, comm::ReduceOp::avg);
  std::vector<comm::Work> works;
  for (Bucket& b : buckets_) works.push_back(b.issued ? b.work : rest);
  comm::wait_all(works);
  for (Bucket& b : buckets_) {
    b.ready = 0;
    b.issued = false;
    b.work = {};
  }
  for (auto& [param, marked] : ready_) marked = false;
  // Partial sums over the TP group (sequence parallelism): every rank of the
  // group holds a part of the same parameter's gradient. Summing commutes
  // with the DP average, so doing it after is exact. One operation per group.
  std::vector<std::pair<comm::ProcessGroup*, std::vector<Tensor>>> partial;
  for (nn::Parameter* p : params_) {
    if (!active(p->grad_sum_group)) continue;
    auto it = std::find_if(partial.begin(), partial.end(),
                           [&](const auto& e) { return e.first == p->grad_sum_group.get(); });
    if (it == partial.end()) it = partial.insert(partial.end(), {p->grad_sum_group.get(), {}});
    it->second.push_back(p->grad);
  }
  works.clear();
  for (auto& [group, grads] : partial) works.push_back(group->all_reduce_coalesced(grads));
  comm::wait_all(works);
  sum_shared_gradients(params_);
  last_issued_early_ = issued_early_;
  issued_early_ = 0;
}

}  // namespace weft::optim
