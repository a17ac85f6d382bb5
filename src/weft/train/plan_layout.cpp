#include "weft/train/plan_layout.h"

#include <algorithm>

namespace weft::train {

plan::Layout plan_layout(const TrainConfig& cfg) {
  plan::Layout l;
  l.tp = cfg.tp;
  l.sp = cfg.tp > 1 ? cfg.sp : parallel::SequenceParallel::off;
  l.ep = cfg.ep;
  l.gtp = cfg.gtp;
  l.dp = std::max(cfg.dp, 1);
  l.pp = cfg.pp;
  l.vpp = cfg.vpp;
  l.schedule = plan::parse_pipeline_schedule(cfg.pp_schedule);
  l.micro_batch = cfg.micro_batch;
  l.grad_accum = cfg.grad_accum;
  l.distributed_optimizer = cfg.distributed_optimizer;
  switch (cfg.model.recompute) {
    case nn::Recompute::none: l.recompute = plan::Recompute::none; break;
    case nn::Recompute::selective: l.recompute = plan::Recompute::selective; break;
    case nn::Recompute::full: l.recompute = plan::Recompute::full; break;
  }
  l.recompute_layers = cfg.model.recompute == nn::Recompute::none ? 0 : cfg.model.recompute_layers;
  return l;
}

plan::Workload plan_workload(const TrainConfig& cfg) {
  return {.model = cfg.model,
          .compute = cfg.compute_dtype(),
          .quantized = cfg.precision.quantized(),
          .gpu = Device::parse(cfg.device).is_cuda(),
          .bucket_mb = cfg.bucket_mb,
          .gtp_cache = cfg.gtp_cache,
          .gtp_grad_accum_full = cfg.gtp_grad_accum == "full"};
}

}  // namespace weft::train
