#include "weft/nn/weight_sources.h"

#include "weft/parallel/gtp/runtime.h"
#include "weft/parallel/gtp/sharded_weight_source.h"

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

}  // namespace weft::nn
