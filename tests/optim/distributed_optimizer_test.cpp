// DistributedOptimizer on sharded GradSync buckets against the replicated
// GradSync + AdamW: the same parameters after several steps, the same global
// gradient norm (also summed bucket by bucket, BucketNormSums, both ways),
// two moments of a third of each bucket at three data ranks, and a whole
// AdamW state gathered and loaded back. Parameters of odd sizes over three ranks,
// so that shards split parameters and buckets are padded.
#include "weft/optim/distributed_optimizer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "testing.h"
#include "weft/comm/local.h"
#include "weft/optim/adamw.h"
#include "weft/optim/grad_norm.h"
#include "weft/optim/grad_sync.h"

namespace weft::optim {
namespace {

// The last parameter's gradient is a partial sum over `tp` (a replicated
// weight's under sequence parallelism: replicated over tp and dp); the
// others are split over tp (each tp rank counts its own).
std::vector<nn::Parameter> make_params(const std::shared_ptr<comm::ProcessGroup>& tp) {
  std::vector<nn::Parameter> ps;
  const int64_t sizes[] = {7, 33, 16, 5, 64};
  for (size_t i = 0; i < std::size(sizes); ++i) {
    std::vector<float> v(static_cast<size_t>(sizes[i]));
    for (size_t k = 0; k < v.size(); ++k) v[k] = 0.01f * static_cast<float>((k * 7 + i * 3) % 11);
    nn::ShardSpec spec;
    spec.global_shape = Shape{sizes[i]};
    spec.replicated_over = {"dp"};
    ps.push_back(nn::make_parameter("p" + std::to_string(i), Tensor::from(spec.global_shape, v),
                                    spec, i % 2 == 0));
  }
  ps.back().grad_sum_group = tp;
  ps.back().spec.replicated_over = {"tp", "dp"};
  return ps;
}

void fill_grads(std::vector<nn::Parameter>& ps, int rank, int step) {
  for (size_t i = 0; i < ps.size(); ++i) {
    float* g = ps[i].grad.data<float>();
    for (int64_t k = 0; k < ps[i].grad.numel(); ++k) {
      g[k] = 0.1f * static_cast<float>((k * 5 + static_cast<int64_t>(i) + rank * 3 + step) % 13) -
             0.6f;
    }
  }
}

std::vector<nn::Parameter*> pointers(std::vector<nn::Parameter>& ps) {
  std::vector<nn::Parameter*> out;
  for (auto& p : ps) out.push_back(&p);
  return out;
}

TEST(DistributedOptimizer, EqualsReplicatedAdamWOverThreeDataRanks) {
  // tp 2 x dp 3: the ranks of a tp group share their data rank, hence their shards.
  comm::run_local(6, [](comm::ProcessGroup& world) {
    auto dp = world.new_subgroups_by_enumeration({{0, 2, 4}, {1, 3, 5}}, "dp");
    auto tp = world.new_subgroups_by_enumeration({{0, 1}, {2, 3}, {4, 5}}, "tp");
    const Groups groups{{"dp", dp}, {"tp", tp}};
    std::vector<nn::Parameter> a = make_params(tp), b = make_params(tp);
    GradSync replicated(pointers(a), dp, 128);
    GradSync sharded(pointers(b), dp, 128, ExecContext::host(), /*shard=*/true);
    // The norm's sums bucket by bucket, both ways.
    BucketNormSums replicated_sums(groups, {}, ExecContext::host());
    BucketNormSums sharded_sums(groups, {"dp"}, ExecContext::host());
    replicated_sums.observe(replicated);
    sharded_sums.observe(sharded);
    ASSERT_GT(sharded.num_buckets(), 1);
    AdamW adamw(pointers(a), {.weight_decay = 0.1f});
    DistributedOptimizer dist(pointers(b), {&sharded}, {.weight_decay = 0.1f});
    Tensor scale = Tensor::from({1}, std::vector<float>{0.7f});
    for (int step = 0; step < 3; ++step) {
      fill_grads(a, world.rank(), step);
      fill_grads(b, world.rank(), step);
      for (auto it = b.rbegin(); it != b.rend(); ++it) sharded.mark_ready(&*it);
      replicated.finish();
      sharded.finish();
      Tensor whole = Tensor::zeros({1}, DType::f64), shards = Tensor::zeros({1}, DType::f64);
      global_grad_norm_sum(pointers(a), groups, ExecContext::host(), whole);
      sharded_grad_norm_sum(dist.buckets(), groups, {"dp"}, ExecContext::host(), shards);
      EXPECT_NEAR(*shards.data<double>(), *whole.data<double>(), 1e-12 * *whole.data<double>());
      Tensor by_bucket = Tensor::zeros({1}, DType::f64);
      replicated_sums.total(by_bucket);
      EXPECT_NEAR(*by_bucket.data<double>(), *whole.data<double>(), 1e-12 * *whole.data<double>());
      sharded_sums.total(by_bucket);
      EXPECT_NEAR(*by_bucket.data<double>(), *whole.data<double>(), 1e-12 * *whole.data<double>());
      adamw.step(0.01f, scale);
      dist.step(0.01f, scale);
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_TRUE(testing::close(a[i].value, b[i].value, {1e-6, 1e-7}))
            << a[i].name << " step " << step;
      }
    }
    // Two f32 moments of a third of each (padded) bucket.
    int64_t bucket_elements = 0;
    for (const BucketShard* bucket : dist.buckets()) bucket_elements += bucket->flat.numel();
    EXPECT_EQ(dist.state_bytes(), 2 * 4 * bucket_elements / 3);
    // Gathered: AdamW's moments; loaded back into fresh shards: the same.
    const std::unique_ptr<AdamW> gathered = dist.gathered();
    EXPECT_EQ(gathered->steps_taken(), 3);
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_TRUE(
          testing::close(adamw.first_moments()[i], gathered->first_moments()[i], {1e-6, 1e-9}));
      EXPECT_TRUE(
          testing::close(adamw.second_moments()[i], gathered->second_moments()[i], {1e-6, 1e-12}));
    }
    DistributedOptimizer fresh(pointers(b), {&sharded}, {.weight_decay = 0.1f});
    fresh.load(*gathered);
    const std::unique_ptr<AdamW> again = fresh.gathered();
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(again->first_moments()[i].to_vector(), gathered->first_moments()[i].to_vector());
    }
  });
}

}  // namespace
}  // namespace weft::optim
