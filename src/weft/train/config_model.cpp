// What a run's configuration builds its model on: the parallel context
// (groups, sequence parallelism, precision, device, overlap, GTP) and the
// model's configuration.
#include <filesystem>
#include <fstream>

#include "weft/comm/world.h"
#include "weft/parallel/gtp/runtime.h"
#include "weft/train/config.h"

namespace weft::train {

parallel::OverlapConfig overlap_config(const std::string& text) {
  std::error_code ec;
  if (text.find('=') != std::string::npos || !std::filesystem::is_regular_file(text, ec)) {
    return parallel::OverlapConfig::parse(text);
  }
  std::ifstream in(text);
  WEFT_CHECK(in.good(), "cannot read the overlap file {}", text);
  std::stringstream ss;
  ss << in.rdbuf();
  const io::Json j = io::parse_json(ss.str(), text);
  WEFT_CHECK(j.is_object(),
             "overlap file {}: expected an object of GEMM names, e.g. {{\"fc2_fprop\": "
             "{{\"method\": \"pipeline\", \"num_splits\": 8}}}}",
             text);
  parallel::OverlapConfig c = parallel::OverlapConfig::defaults();
  for (const auto& [name, v] : j.as_object()) {
    if (name == "comm_cores") {
      WEFT_CHECK(v.is_integer() && v.as_int() >= 0 && v.as_int() <= 1024,
                 "overlap file {}: comm_cores must be an integer in [0, 1024]", text);
      c.set_comm_cores(static_cast<int>(v.as_int()));
      continue;
    }
    parallel::check_overlap_gemm_name(name);
    WEFT_CHECK(v.is_object() && v.find("method") && v.at("method").is_string(),
               "overlap file {}: {} must be an object with a \"method\" string", text, name);
    parallel::OverlapChoice choice{parallel::parse_overlap_method(v.at("method").as_string(), name),
                                   4};
    if (v.find("num_splits")) {
      const io::Json& n = v.at("num_splits");
      WEFT_CHECK(n.is_integer() && n.as_int() >= 1 && n.as_int() <= 1024,
                 "overlap file {}: {}.num_splits must be an integer in [1, 1024]", text, name);
      choice.num_splits = static_cast<int>(n.as_int());
    }
    c.set(name, choice);
  }
  return c;
}

parallel::ContextPtr model_context(const TrainConfig& c, std::shared_ptr<comm::ProcessGroup> tp,
                                   std::shared_ptr<comm::ProcessGroup> dp,
                                   std::shared_ptr<comm::ProcessGroup> gtp,
                                   std::shared_ptr<comm::ProcessGroup> ep,
                                   std::shared_ptr<comm::ProcessGroup> cp) {
  auto pc = std::make_shared<parallel::ParallelContext>();
  pc->cp = std::move(cp);
  pc->cp_comm = parallel::context::parse_cp_comm(c.cp_comm);
  pc->tp = std::move(tp);
  pc->dp = std::move(dp);
  pc->ep = std::move(ep);
  pc->sp = c.sp;
  pc->precision = c.precision;
  pc->seed = c.seed;
  pc->exec = ExecContext::on(Device::parse(c.device));
  pc->overlap = overlap_config(c.overlap);
  parallel::gtp::Options options{
      .cache_weights = c.gtp_cache,
      .grad_accumulation = parallel::gtp::parse_grad_accumulation(c.gtp_grad_accum),
      .batch_experts = c.gtp_batch_experts};
  if (!c.gtp_plan.empty()) {
    options.shards = [plan = nn::PartitionPlan::parse(c.gtp_plan)](const std::string& name) {
      return plan.partitioned(name);
    };
  }
  parallel::gtp::enable(*pc, std::move(gtp), std::move(options));
  return pc;
}

nn::GptConfig model_config(const TrainConfig& c) { return c.model; }

void apply_global_batch(TrainConfig& c, int dp) {
  if (!c.global_batch) return;
  const int64_t split = static_cast<int64_t>(dp) * c.grad_accum;
  WEFT_CHECK(*c.global_batch % split == 0,
             "--global-batch {} does not split evenly over dp {} x --grad-accum {}: use a "
             "multiple of {}, or another --grad-accum",
             *c.global_batch, dp, c.grad_accum, split);
  c.micro_batch = *c.global_batch / split;
}

}  // namespace weft::train
