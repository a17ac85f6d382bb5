// Checking a run's configuration as a whole (validate) and reading its
// --overlap setting: the rules that span several options, with messages that
// name the options a user sets.
#include <algorithm>
#include <cctype>
#include <string_view>
#include <utility>

#include "weft/comm/world.h"
#include "weft/core/cuda.h"
#include "weft/parallel/context/chunks.h"
#include "weft/parallel/context/options.h"
#include "weft/parallel/pipeline/schedule.h"
#include "weft/parallel/pipeline/stages.h"
#include "weft/train/config.h"

namespace weft::train {

namespace {

// `message` (nn::validate's) with each field it names that an option sets
// written as the option: "heads 4 is not divisible by tp 3" -> "--heads 4 is
// not divisible by --tp 3".
std::string with_option_names(const std::string& message) {
  static constexpr std::pair<std::string_view, std::string_view> kOptions[] = {
      {"vocab_pad", "--vocab-pad"},
      {"vocab", "--vocab"},
      {"seq", "--seq"},
      {"layers", "--layers"},
      {"width", "--width"},
      {"heads", "--heads"},
      {"dropout", "--dropout"},
      {"tp", "--tp"},
      {"kv_heads", "--kv-heads"},
      {"hidden", "--hidden"},
      {"rope_theta", "--rope-theta"},
      {"norm_eps", "--norm-eps"},
      {"moe_experts", "--moe-experts"},
      {"moe_top_k", "--moe-top-k"},
      {"moe_every", "--moe-every"},
      {"moe_capacity_factor", "--moe-capacity-factor"},
      {"moe_aux_coef", "--moe-aux-coef"},
      {"moe_z_coef", "--moe-z-coef"}};
  auto word_char = [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
  };
  std::string out;
  size_t i = 0;
  while (i < message.size()) {
    if (!word_char(message[i])) {
      out += message[i++];
      continue;
    }
    size_t end = i;
    while (end < message.size() && word_char(message[end])) ++end;
    const std::string_view word(message.data() + i, end - i);
    // "tp-dp" or "--tp" are not a field's name.
    const bool alone =
        (i == 0 || message[i - 1] != '-') && (end == message.size() || message[end] != '-');
    const auto* option = std::find_if(std::begin(kOptions), std::end(kOptions),
                                      [&](const auto& o) { return o.first == word; });
    out += alone && option != std::end(kOptions) ? option->second : word;
    i = end;
  }
  return out;
}

// --pp, --pp-layers, --pp-schedule, --vpp: the schedule can run the layout
// (parallel/pipeline/schedule.h) and the layers split into its stages.
void validate_pipeline(const TrainConfig& c) {
  using namespace parallel::pipeline;
  const ScheduleKind kind = parse_schedule_kind(c.pp_schedule);
  if (c.pp == 1 && c.vpp == 1 && c.pp_layers.empty()) return;
  WEFT_CHECK(c.gtp == 1,
             "--gtp {} with --pp {}: generalized tensor parallelism does not run inside pipeline "
             "stages yet; use --tp and --dp with --pp",
             c.gtp, c.pp);
  WEFT_CHECK(!c.distributed_optimizer,
             "--distributed-optimizer with --pp {} --vpp {}: pipeline stages do not shard the "
             "optimizer yet (a tied head's embedding gradient is summed after the reduce-scatter); "
             "drop --distributed-optimizer, or use --pp 1 --vpp 1",
             c.pp, c.vpp);
  const std::string problem = layout_problem(kind, c.pp, c.vpp, static_cast<int>(c.grad_accum));
  WEFT_CHECK(problem.empty(), "{}", problem);
  (void)split_layers(c.model.layers, c.pp, c.vpp, c.pp_layers, kind == ScheduleKind::interleaved);
}

// --cp: whole chunks of every sequence on each rank; a2a splits the heads.
void check_context_parallel(const TrainConfig& c) {
  if (c.cp == 1) return;
  parallel::context::check_sequence(c.model.seq, c.cp);
  const int64_t heads = c.model.heads / c.tp;
  const int64_t kv = std::max<int64_t>(c.model.kv_head_count() / c.tp, 1);
  const parallel::context::CpComm comm = parallel::context::parse_cp_comm(c.cp_comm);
  parallel::context::check_heads(comm, c.cp, heads, kv);
  WEFT_CHECK(comm != parallel::context::CpComm::a2a || c.model.dropout == 0.0f,
             "--cp-comm a2a runs attention on head shards, whose dropout masks are not the whole "
             "model's: use --cp-comm p2p or allgather with --dropout {}",
             c.model.dropout);
  WEFT_CHECK(c.pp == 1 && c.vpp == 1,
             "--cp {} with --pp {} --vpp {}: context parallelism inside pipeline stages is not "
             "built yet; use one of the two",
             c.cp, c.pp, c.vpp);
  WEFT_CHECK(!Device::parse(c.device).is_cuda(),
             "--cp {} runs its attention exchange on the CPU: --device cuda with --cp above 1 is "
             "not supported yet",
             c.cp);
}

}  // namespace

void validate(const TrainConfig& c) {
  // The model's shape rules are nn::validate's; they name the fields, the
  // user sets them with options.
  try {
    nn::validate(c.model, c.tp);
  } catch (const Error& e) {
    throw Error(with_option_names(e.what()), e.where());
  }
  check_context_parallel(c);
  WEFT_CHECK(c.ep == 1 || c.model.moe_experts > 0,
             "--ep {} splits the experts of MoE layers, and this model has none: pass "
             "--moe-experts N (or --preset moe-tiny), or drop --ep",
             c.ep);
  WEFT_CHECK(c.model.moe_experts % c.ep == 0,
             "--moe-experts {} do not split over --ep {}: choose an --ep that divides the number "
             "of experts",
             c.model.moe_experts, c.ep);
  // Delayed scaling's world-wide reduction adds each rank's amaxes entry by
  // entry: under EP the ranks hold different experts, so their entries differ.
  WEFT_CHECK(
      c.ep == 1 || !c.precision.quantized() || c.precision.amax_group != parallel::AmaxGroup::tp_dp,
      "--amax-group tp-dp reduces every rank's amaxes entry by entry, and under --ep {} "
      "the ranks hold different experts: use --amax-group tp",
      c.ep);
  WEFT_CHECK(c.gtp == 1 || c.tp <= c.model.kv_head_count(),
             "--kv-heads {} below --tp {} replicates each key/value head on {} TP ranks, which "
             "--gtp {} does not support: use --gtp 1, or --kv-heads a multiple of --tp",
             c.model.kv_head_count(), c.tp, c.tp / c.model.kv_head_count(), c.gtp);
  WEFT_CHECK(c.model.recompute_layers <= c.model.layers,
             "--recompute-layers {} exceeds the model's {} layers: pass at most --layers, or 0 "
             "for all",
             c.model.recompute_layers, c.model.layers);
  WEFT_CHECK(c.model.recompute != nn::Recompute::full || c.model.moe_experts == 0,
             "--recompute full does not cover MoE layers (their routers' losses are read after "
             "the forward): use --recompute selective, or none");
  // The data ranks: cp · ep · gtp · dp (dp auto: the Trainer checks the world's).
  WEFT_CHECK(!c.distributed_optimizer || c.dp == 0 || c.cp * c.ep * c.gtp * c.dp > 1,
             "--distributed-optimizer shards the optimizer over the data-parallel ranks, and "
             "this layout has one (dp 1): drop the flag, or run with --dp 2 or more");
  WEFT_CHECK(c.lr_value() > 0, "--lr must be positive, got {}", c.lr_value());
  WEFT_CHECK(!c.min_lr || *c.min_lr <= c.lr_value(), "--min-lr {} is above --lr {}", *c.min_lr,
             c.lr_value());
  WEFT_CHECK(c.warmup_steps() <= c.schedule_total(), "--warmup {} is longer than the run ({} {})",
             c.warmup_steps(), c.schedule_steps ? "--schedule-steps" : "--steps",
             c.schedule_total());
  WEFT_CHECK(c.val_fraction > 0 && c.val_fraction < 1,
             "--val-fraction must lie strictly between 0 and 1, got {}", c.val_fraction);
  WEFT_CHECK(c.bucket_mb > 0 && c.bucket_mb <= 1 << 20,
             "--bucket-mb must be positive and at most 1048576 (1 TiB), got {}", c.bucket_mb);
  if (c.sp == nn::SequenceParallel::batch) {
    WEFT_CHECK(c.micro_batch % c.tp == 0,
               "--sp batch splits each micro-batch over the TP ranks: --micro-batch {} must be a "
               "multiple of --tp {}",
               c.micro_batch, c.tp);
  }
  if (c.sp == nn::SequenceParallel::seq) {
    WEFT_CHECK(c.model.seq % c.tp == 0,
               "--sp seq splits the sequence over the TP ranks: --seq {} must be a multiple of "
               "--tp {}",
               c.model.seq, c.tp);
  }
  try {
    (void)overlap_config(c.overlap);
  } catch (const Error& e) {
    WEFT_FAIL("--overlap {}: {}", c.overlap, e.what());
  }
  try {
    (void)nn::PartitionPlan::parse(c.gtp_plan);
  } catch (const Error& e) {
    WEFT_FAIL("--gtp-plan {}: {}", c.gtp_plan, e.what());
  }
  if (const Device device = Device::parse(c.device); device.is_cuda()) {
    cuda::check_device(device);
    // Ranks are threads sharing the GPU (the local backend moves GPU memory),
    // or one process per GPU under mpirun (the nccl backend, train/launch.cpp).
    WEFT_CHECK(c.backend != "mpi",
               "--device {} with --backend mpi: GPU ranks run as threads sharing the GPU "
               "(--backend local) or one process per GPU over NCCL (--backend nccl under "
               "mpirun)",
               c.device);
    WEFT_CHECK(c.gtp == 1,
               "--gtp {} with --device {}: generalized tensor parallelism has no GPU path yet; "
               "use --tp and --dp",
               c.gtp, c.device);
    using parallel::Recipe;
    const Recipe r = c.precision.recipe;
    WEFT_CHECK(r != Recipe::nvfp4,
               "--precision {} has no GPU kernels yet (NVFP4 block quantization, stochastic "
               "rounding, the Hadamard transform): use bf16, fp8-delayed, fp8-current, fp8-block "
               "or mxfp8 with --device {}",
               parallel::recipe_name(r), c.device);
  }
  validate_pipeline(c);
  WEFT_CHECK(c.save_every == 0 || !c.save.empty(), "--save-every {} needs --save DIR",
             c.save_every);
  WEFT_CHECK(c.init.empty() || c.resume.empty(),
             "--init starts a new run from weights and --resume continues one: pass only one");
}

}  // namespace weft::train
