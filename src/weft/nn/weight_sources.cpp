#include "weft/nn/weight_sources.h"

#include "weft/parallel/gtp/runtime.h"
#include "weft/parallel/gtp/sharded_weight_source.h"
#include "weft/parallel/gtp/source_batch.h"

namespace weft::nn {

std::shared_ptr<parallel::WeightSource> make_weight_source(const parallel::ContextPtr& context,
                                                           Parameter& weight) {
  const auto& runtime = context->gtp_runtime;
  const std::string suffix = ".weight";
  const std::string name = weight.name.ends_with(suffix)
                               ? weight.name.substr(0, weight.name.size() - suffix.size())
                               : weight.name;
  if (!runtime || (runtime->options.shards && !runtime->options.shards(name))) {
    return std::make_shared<parallel::LocalShardSource>(weight, context->precision, context->exec);
  }
  auto source = std::make_shared<parallel::gtp::ShardedWeightSource>(
      weight, context->gtp, runtime, context->precision, context->exec);
  weight = Parameter{};
  return source;
}

std::unique_ptr<parallel::WeightBatch> make_weight_batch(
    const parallel::ContextPtr& context,
    const std::vector<std::shared_ptr<parallel::WeightSource>>& sources) {
  const auto& runtime = context->gtp_runtime;
  if (!runtime || !runtime->options.batch_experts || sources.empty()) return nullptr;
  std::vector<parallel::gtp::ShardedWeightSource*> sharded;
  for (const auto& s : sources) {
    auto* g = dynamic_cast<parallel::gtp::ShardedWeightSource*>(s.get());
    if (!g) return nullptr;  // some weights kept whole (Options::shards)
    sharded.push_back(g);
  }
  return std::make_unique<parallel::gtp::SourceBatch>(std::move(sharded), runtime);
}

}  // namespace weft::nn
