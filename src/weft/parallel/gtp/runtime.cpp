#include "weft/parallel/gtp/runtime.h"

namespace weft::parallel::gtp {

Runtime::Runtime(Options o, const ExecContext& exec)
    : options(std::move(o)), cache(options.cache_weights, exec), chain(options.cache_weights - 1) {
  WEFT_CHECK(options.alignment >= 1, "the GTP row alignment must be positive, got {}",
             options.alignment);
}

void enable(ParallelContext& context, std::shared_ptr<comm::ProcessGroup> group, Options options) {
  context.gtp = std::move(group);
  context.gtp_runtime = context.gtp && context.gtp->size() > 1
                            ? std::make_shared<Runtime>(std::move(options), context.exec)
                            : nullptr;
}

}  // namespace weft::parallel::gtp
