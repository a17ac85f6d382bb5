#include "weft/train/run_loop.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>

#include "weft/core/cuda.h"
#include "weft/core/memory.h"
#include "weft/core/phase_clock.h"
#include "weft/core/profile.h"
#include "weft/infer/generate.h"
#include "weft/io/checkpoint.h"
#include "weft/io/checkpoint_dir.h"
#include "weft/io/scaling_state.h"
#include "weft/kernels/step_scalars.h"
#include "weft/optim/grad_norm.h"
#include "weft/parallel/gtp/runtime.h"
#include "weft/train/layout.h"
#include "weft/train/load_model.h"
#include "weft/train/metrics.h"
#include "weft/train/pipeline_step.h"
#include "weft/train/run_start.h"
#include "weft/train/schedule.h"
#include "weft/train/stop_signal.h"

namespace weft::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A step's scalars in one buffer where the model runs, a view each, so that
// one copy brings them all to the host at the end of the step.
class StepScalars {
 public:
  static constexpr int64_t kBytes = 32;
  explicit StepScalars(const Tensor& buffer)
      : loss_sum(buffer.view_as(DType::f64, {1}, 0)),
        losses(buffer.view_as(DType::f32, {2}, 8)),
        norm(buffer.view_as(DType::f64, {1}, 16)),
        scale(buffer.view_as(DType::f32, {1}, 24)),
        buffer_(buffer) {}

  Tensor loss_sum;  // f64: the micro-batches' mean losses added up
  Tensor losses;    // f32 {loss, auxiliary loss}: the step's, averaged over the data ranks
  Tensor norm;      // f64: the gradient's global sum of squares, then its norm
  Tensor scale;     // f32: the clipping factor AdamW reads (NaN: no update)

  struct Values {
    double loss = 0, aux_loss = 0, grad_norm = 0;
  };
  // The step's one host read (on a GPU it waits for the step's work).
  Values read() const {
    const Tensor host = buffer_.device().is_cpu() ? buffer_ : buffer_.to(Device::cpu());
    const StepScalars h(host);
    return {.loss = h.losses.data<float>()[0],
            .aux_loss = h.losses.data<float>()[1],
            .grad_norm = *h.norm.data<double>()};
  }

 private:
  Tensor buffer_;
};

}  // namespace

Trainer::Trainer(const TrainConfig& cfg, comm::ProcessGroup& world, const io::Dataset& data)
    : cfg_(cfg), world_(world), data_(data), data_seed_(cfg.seed) {
  validate(cfg_);
  const int model_ranks = cfg_.tp * cfg_.cp * cfg_.ep * cfg_.gtp * cfg_.pp;
  WEFT_CHECK(world.size() % model_ranks == 0,
             "the world of {} ranks is not divisible by --tp {} x --cp {} x --ep {} x --gtp {} x "
             "--pp {}: start a multiple of {} ranks",
             world.size(), cfg_.tp, cfg_.cp, cfg_.ep, cfg_.gtp, cfg_.pp, model_ranks);
  const int dp = world.size() / model_ranks;
  WEFT_CHECK(cfg_.dp == 0 || cfg_.dp == dp,
             "--dp {} does not match the world: {} ranks at --tp {} x --cp {} x --ep {} x --gtp {} "
             "x --pp {} make dp {}",
             cfg_.dp, world.size(), cfg_.tp, cfg_.cp, cfg_.ep, cfg_.gtp, cfg_.pp, dp);
  WEFT_CHECK(data.seq_len() == cfg_.model.seq,
             "the dataset is split for windows of {}, the model's context is {}", data.seq_len(),
             cfg_.model.seq);
  const bool gtp = cfg_.gtp > 1;
  grid_ = make_grid(world, cfg_, dp);
  // The ranks that see different data: the ep, gtp and dp groups together.
  data_group_ = group_across(world, *grid_, data_dims(grid_->layout()));
  replica_group_ = gtp && cfg_.precision.quantized() ? group_across(world, *grid_, {"tp", "gtp"})
                                                     : grid_->group_ptr("tp");
  const int tp_rank = grid_->rank_in("tp");
  rng_ = parallel::RngTracker(cfg_.seed, tp_rank);
  // One GPU per process (the nccl backend): the model runs on this rank's GPU.
  TrainConfig on_device = cfg_;
  if (world.device().is_cuda() && Device::parse(cfg_.device).is_cuda()) {
    on_device.device = world.device().str();
  }
  const parallel::ContextPtr context = model_context(
      on_device, grid_->group_ptr("tp"), grid_->group_ptr("dp"),
      gtp ? grid_->group_ptr("gtp") : nullptr, cfg_.ep > 1 ? grid_->group_ptr("ep") : nullptr,
      cfg_.cp > 1 ? grid_->group_ptr("cp") : nullptr);
  // Under --pp this rank's first stage (pipeline_step.h); the whole model otherwise.
  const int pp_rank = grid_->layout().has("pp") ? grid_->rank_in("pp") : 0;
  model_ = std::make_unique<nn::Gpt>(context, model_config(cfg_), pipeline_stage(cfg_, pp_rank));
  params_ = model_->parameters();
  if (train::pipelined(cfg_)) {
    setup_pipeline(context);
    for (auto& c : pipeline_->more_chunks) {
      for (nn::Parameter* p : c->parameters()) params_.push_back(p);
    }
  }
  const auto bucket = std::max<int64_t>(static_cast<int64_t>(cfg_.bucket_mb * (1 << 20)), 1);
  // The model's execution context: optimizer and gradient sync run where it does.
  const ExecContext& ec = model_->context()->exec;
  // Each gradient is averaged over the data dimensions it is replicated over
  // (train/layout.h); GTP shards once their reduce-scatter made them final.
  WEFT_CHECK(!cfg_.distributed_optimizer || data_group_->size() > 1,
             "--distributed-optimizer shards the optimizer over the data-parallel ranks, and this "
             "layout has one (dp 1): drop the flag, or run with --dp 2 or more");
  syncs_ = std::make_unique<GradSyncs>(world, *grid_, data_group_, params_, bucket, ec,
                                       cfg_.distributed_optimizer);
  norm_groups_ = {{"tp", grid_->group_ptr("tp")}, {"dp", grid_->group_ptr("dp")}};
  for (const char* dim : {"cp", "ep", "gtp", "pp"}) {
    if (grid_->layout().has(dim)) norm_groups_[dim] = grid_->group_ptr(dim);
  }
  // Not under --pp / --vpp: a tied head's wte gradient is summed over the
  // pipeline's ends after the syncs finish (pipeline_finish_gradients), so
  // the norm sums the pipeline's parameters in one pass after that.
  if (ec.device().is_cpu() && !pipeline_) {
    norm_sums_ = std::make_unique<optim::BucketNormSums>(
        norm_groups_,
        cfg_.distributed_optimizer ? data_dims(grid_->layout()) : std::vector<std::string>{}, ec);
    syncs_->observe(*norm_sums_);
  }
  if (gtp) {
    model_->context()->gtp_runtime->chain.set_on_gradient_final(
        [this](nn::Parameter& p) { syncs_->mark_ready(&p); });
  }
  const optim::AdamWOptions adamw{.weight_decay = static_cast<float>(cfg_.weight_decay)};
  if (cfg_.distributed_optimizer) {
    distributed_ =
        std::make_unique<optim::DistributedOptimizer>(params_, syncs_->syncs(), adamw, ec);
  } else {
    optimizer_ = std::make_unique<optim::AdamW>(params_, adamw, ec);
  }
  scalars_ = ec.zeros({StepScalars::kBytes}, DType::u8, MemoryTag::optimizer);
  const bool batch_sp = cfg_.sp == nn::SequenceParallel::batch;
  // The cp ranks of a data group read the same sequences (cp is its
  // fastest-varying dimension): the model keeps each rank's chunks.
  slice_ = {.dp_rank = data_group_->rank() / cfg_.cp,
            .dp_size = data_group_->size() / cfg_.cp,
            .sub_rank = batch_sp ? tp_rank : 0,
            .sub_size = batch_sp ? cfg_.tp : 1};
  if (!cfg_.init.empty()) load_weights(cfg_.init, world, *grid_, *model_);
  if (!cfg_.resume.empty()) {
    WEFT_CHECK(cfg_.vpp == 1,
               "--resume with --vpp {}: checkpoints hold one chunk per rank; resume without "
               "--vpp (any --pp) and switch to interleaved afterwards",
               cfg_.vpp);
    const std::string dir = io::resolve_checkpoint(cfg_.resume);
    // The distributed optimizer takes its shards of a whole AdamW's state.
    std::unique_ptr<optim::AdamW> whole =
        distributed_ ? std::make_unique<optim::AdamW>(params_, adamw, ec) : nullptr;
    io::TrainState state = io::load_checkpoint(dir, world, *grid_, *model_,
                                               distributed_ ? whole.get() : optimizer_.get());
    if (distributed_) distributed_->load(*whole);
    step_ = state.step;
    if (!cfg_.save.empty() && io::in_run_dir(dir, cfg_.save)) saved_step_ = step_;
    data_seed_ = state.data_seed;
    rng_.set_state(state.rng);
    parallel::ScalingRegistry& scaling = *model_->context()->scaling;
    if (!state.scaling.is_null()) {
      scaling.restore(io::scaling_from_json(state.scaling, "checkpoint " + dir + " scaling state"));
    } else {
      WEFT_CHECK(!cfg_.precision.quantized(),
                 "the checkpoint in {} holds no FP8 scaling state, so --precision {} cannot "
                 "resume it bitwise: resume with the precision it was saved with",
                 cfg_.resume, parallel::recipe_name(cfg_.precision.recipe));
    }
    WEFT_CHECK(step_ < cfg_.steps,
               "the checkpoint in {} is at step {} and --steps is {}: pass a larger --steps to "
               "continue training",
               cfg_.resume, step_, cfg_.steps);
  }
  sampler_ = std::make_unique<io::Sampler>(data_, data_seed_, cfg_.sequences_per_step(dp_size()));
}

Trainer::~Trainer() {
  // The chain reports to syncs_, which go before the model does.
  if (const auto& gtp = model_->context()->gtp_runtime) gtp->chain.set_on_gradient_final({});
}

optim::AdamW& Trainer::optimizer() {
  WEFT_CHECK(optimizer_ != nullptr,
             "this trainer runs the distributed optimizer: see distributed_optimizer()");
  return *optimizer_;
}

void Trainer::check_finite(double loss, double norm, const std::string& where) const {
  const bool loss_bad = !std::isfinite(loss);
  WEFT_CHECK(!loss_bad && std::isfinite(norm),
             "step {}: the {} is not finite ({}){}; training stopped before this step's update{}. "
             "Lower --lr, keep --grad-clip on, or resume from an earlier checkpoint",
             step_ + 1, loss_bad ? "training loss" : "gradient norm", loss_bad ? loss : norm, where,
             saved_step_ < 0
                 ? std::string()
                 : format(" (the checkpoint of step {} in {} is kept)", saved_step_, cfg_.save));
}

StepResult Trainer::step() {
  const cuda::NvtxRange step_range("step");
  const auto t0 = Clock::now();
  const profile::Totals p0 = profile::totals();
  StepResult r;
  const int64_t accum = cfg_.grad_accum;
  // GTP shards are final only after their deferred reduce-scatter: the
  // prefetch chain reports them (set_on_gradient_final).
  auto ready = [this](const std::vector<nn::Parameter*>& ps) {
    for (const nn::Parameter* p : ps) {
      if (!p->spec.rows_split()) syncs_->mark_ready(p);
    }
  };
  parallel::gtp::Runtime* gtp = model_->context()->gtp_runtime.get();
  const ExecContext& ec = model_->context()->exec;
  StepScalars sc(scalars_);
  // The phases' points: host clock readings on the CPU, events on a GPU's
  // stream (read after the step's one host read, so timing waits for nothing).
  PhaseClock clock(ec);
  std::vector<std::pair<int, int>> forward_spans, backward_spans;
  double aux_sum = 0;
  if (pipeline_) pipeline_microbatches(sc.loss_sum, aux_sum, r.times);
  for (int64_t m = 0; m < (pipeline_ ? 0 : accum); ++m) {
    io::Batch b = sampler_->next_batch(step_, 0, part(m));
    nn::Ctx ctx(&rng_, true);
    // The microbatches of a step see the same weights: bf16 casts once a step.
    ctx.set_reuse_weight_casts(true);
    ctx.set_final_microbatch(m == accum - 1);
    // Weight gradients the first micro-batch's GEMMs write: not zeroed below.
    ctx.set_first_microbatch(m == 0);
    syncs_->set_sync(m == accum - 1);
    const int forward_start = clock.mark();
    {
      const cuda::NvtxRange range("forward");
      kernels::accumulate_scalar(ec, model_->forward_loss_tensor(ctx, b.inputs, b.targets),
                                 sc.loss_sum, /*reset=*/m == 0);
      aux_sum += model_->aux_loss(ctx);
    }
    const int backward_start = clock.mark();
    forward_spans.emplace_back(forward_start, backward_start);
    {
      const cuda::NvtxRange range("backward");
      model_->backward_loss(ctx, 1.0f / static_cast<float>(accum), ready);
      // Every reduce-scatter completed before anything reads a gradient.
      if (gtp) gtp->chain.drain();
    }
    backward_spans.emplace_back(backward_start, clock.mark());
  }
  const int sync_start = clock.mark();
  std::optional<cuda::NvtxRange> sync_range(std::in_place, "gradient sync");
  syncs_->finish();
  if (pipeline_) pipeline_finish_gradients();
  const int sync_end = clock.mark();
  sync_range.reset();
  // The quantized recipes' step end: delayed scaling reduces every amax of
  // the step over its group in one collective and updates the scales.
  const parallel::ParallelContext& pc = *model_->context();
  if (pc.precision.quantized()) {
    const bool world_group = pc.precision.amax_group == parallel::AmaxGroup::tp_dp;
    pc.scaling->end_step(pc.precision, world_group ? &world_ : replica_group_.get());
  }

  const int optimizer_start = clock.mark();
  const cuda::NvtxRange optimizer_range("optimizer");
  // Loss, gradient norm and clipping stay on the model's device; AdamW reads
  // the clipping factor there and skips the update when the loss or the
  // norm is not finite, so the step reads the host once, below.
  kernels::finish_mean(ec, sc.loss_sum, static_cast<double>(accum),
                       static_cast<float>(aux_sum / static_cast<double>(accum)), sc.losses);
  // A group of one has nothing to average (x / 1 is x): no collective, which
  // on a GPU would wait on the host; a larger group's result is waited for
  // on the stream where the backend allows it (nccl).
  // Under --pp: the last stage's loss and every stage's auxiliary losses.
  if (pipeline_ && pipeline_->pp) pipeline_->pp->all_reduce(sc.losses).wait(ec);
  if (data_group_->size() > 1) data_group_->all_reduce(sc.losses, comm::ReduceOp::avg).wait(ec);
  if (norm_sums_) {
    norm_sums_->total(sc.norm);
  } else if (distributed_) {
    optim::sharded_grad_norm_sum(distributed_->buckets(), norm_groups_, data_dims(grid_->layout()),
                                 ec, sc.norm);
  } else {
    // Under --pp: every chunk's parameters, a tied head's copy of wte not
    // counted twice.
    optim::global_grad_norm_sum(pipeline_ ? pipeline_->norm_params : params_, norm_groups_, ec,
                                sc.norm);
  }
  kernels::clip_scale(ec, sc.losses, sc.norm, cfg_.grad_clip, sc.scale);
  LrSchedule schedule{.lr = cfg_.lr_value(),
                      .warmup = cfg_.warmup_steps(),
                      .total = cfg_.schedule_total(),
                      .min_lr = cfg_.min_lr};
  r.lr = schedule.at(step_);
  if (distributed_) {
    distributed_->step(static_cast<float>(r.lr), sc.scale);
  } else {
    optimizer_->step(static_cast<float>(r.lr), sc.scale);
  }
  // The next step's first micro-batch writes the weight gradients its GEMMs
  // make (Parameter::grad_overwritten): only the others are zeroed. params_
  // holds every chunk's parameters under --pp / --vpp.
  for (nn::Parameter* p : params_) {
    if (!p->grad_overwritten) p->grad.zero();
  }
  const int optimizer_end = clock.mark();
  const StepScalars::Values v = sc.read();
  r.loss = v.loss;
  r.aux_loss = v.aux_loss;
  r.grad_norm = v.grad_norm;
  if (!std::isfinite(r.loss) || !std::isfinite(r.grad_norm)) {
    // AdamW skipped the update on the device: its step count goes back too,
    // so that the optimizer's state is the last good step's.
    if (distributed_) {
      distributed_->set_steps_taken(distributed_->steps_taken() - 1);
    } else {
      optimizer_->set_steps_taken(optimizer_->steps_taken() - 1);
    }
  }
  for (const auto& [from, to] : forward_spans) r.times.forward += clock.seconds(from, to);
  for (const auto& [from, to] : backward_spans) r.times.backward += clock.seconds(from, to);
  r.times.backward += clock.seconds(sync_start, sync_end);
  r.times.optimizer = clock.seconds(optimizer_start, optimizer_end);
  const bool finite = std::isfinite(r.loss) && std::isfinite(r.grad_norm);
  check_finite(r.loss, r.grad_norm, pipeline_ && !finite ? pipeline_locate_nonfinite() : "");

  ++step_;
  r.step = step_;
  r.tokens = cfg_.sequences_per_step(dp_size()) * cfg_.model.seq;
  const profile::Totals p1 = profile::totals();
  r.times.comm = p1.comm - p0.comm;
  r.times.all_to_all = p1.all_to_all - p0.all_to_all;
  r.times.gemm = p1.gemm - p0.gemm;
  r.times.total = seconds_since(t0);
  return r;
}

std::vector<std::vector<int64_t>> Trainer::expert_load() {
  std::vector<std::vector<int64_t>> load = model_->expert_load();
  if (load.empty()) return load;
  int64_t n = 0;
  for (const auto& l : load) n += static_cast<int64_t>(l.size());
  Tensor flat = Tensor::empty({n}, DType::i64);
  int64_t* v = flat.data<int64_t>();
  for (const auto& l : load) v = std::copy(l.begin(), l.end(), v);
  data_group_->all_reduce(flat).wait();
  const int64_t* sum = flat.data<int64_t>();
  for (auto& l : load) {
    std::copy(sum, sum + l.size(), l.begin());
    sum += l.size();
  }
  return load;
}

io::BatchSlice Trainer::part(int64_t micro) const {
  io::BatchSlice s = slice_;
  s.dp_rank = static_cast<int>(micro) * slice_.dp_size + slice_.dp_rank;
  s.dp_size = static_cast<int>(cfg_.grad_accum) * slice_.dp_size;
  return s;
}

double Trainer::evaluate() {
  const int64_t batch = cfg_.sequences_per_step(dp_size());
  const int64_t n = data_.val_batches(batch, cfg_.eval_batches);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (pipeline_) {
      std::vector<io::Batch> batches;
      for (int64_t m = 0; m < cfg_.grad_accum; ++m) {
        batches.push_back(data_.val_batch(i, batch, part(m)));
      }
      sum += pipeline_evaluate_sum(batches);
      continue;
    }
    for (int64_t m = 0; m < cfg_.grad_accum; ++m) {
      io::Batch b = data_.val_batch(i, batch, part(m));
      nn::Ctx ctx(nullptr, false);
      sum += model_->forward_loss(ctx, b.inputs, b.targets);
    }
  }
  const double local = sum / static_cast<double>(n * cfg_.grad_accum);
  Tensor mean = Tensor::from({1}, std::vector<float>{static_cast<float>(local)});
  data_group_->all_reduce(mean, comm::ReduceOp::avg).wait();
  return mean.item(0);
}

void Trainer::save(const std::string& dir) {
  WEFT_CHECK(cfg_.vpp == 1,
             "checkpoints under --vpp {} are not written: a checkpoint holds one chunk per rank; "
             "train with --vpp 1 (any --pp) to save",
             cfg_.vpp);
  // Relative paths are stored relative to the checkpoint, as they are read.
  io::Json config = relative_paths(cfg_.to_json(), dir);
  config[kPathsKey] = kPathsRelativeToCheckpoint;
  config[kFingerprintKey] = std::to_string(data_.data().fingerprint());
  config[kBatchKey] = cfg_.sequences_per_step(dp_size());
  io::TrainState state{
      .step = step_, .data_seed = data_seed_, .rng = rng_.state(), .config = config};
  state.tokenizer = cfg_.tokenizer_json;
  if (cfg_.precision.quantized())
    state.scaling = io::scaling_json(model_->context()->scaling->snapshot());
  // The distributed optimizer saves a whole AdamW's state (gathered): the
  // checkpoint is the same at any dp, with or without it.
  const std::unique_ptr<optim::AdamW> whole = distributed_ ? distributed_->gathered() : nullptr;
  io::save_checkpoint(dir, world_, *grid_, *model_, distributed_ ? whole.get() : optimizer_.get(),
                      state);
  if (dir == cfg_.save) saved_step_ = step_;
}

std::vector<int32_t> Trainer::sample(const std::vector<int32_t>& prompt, int64_t tokens,
                                     uint64_t seed) {
  return infer::generate(*model_, prompt, {.tokens = tokens, .seed = seed});
}

std::string Trainer::checkpoint(bool drop_others) {
  const std::string dir = (std::filesystem::path(cfg_.save) / io::step_dir_name(step_)).string();
  save(dir);
  io::publish_checkpoint(cfg_.save, step_, cfg_.keep, drop_others, world_);
  saved_step_ = step_;
  return dir;
}

std::vector<int64_t> Trainer::peak_memory() { return exchange_status(0).peak_memory; }

Trainer::WorldStatus Trainer::exchange_status(int stop_signal) {
  // One all-gather a step: each rank's peak and signal.
  constexpr int64_t kFields = 2;
  Tensor in = Tensor::empty({kFields}, DType::i64);
  in.data<int64_t>()[0] = MemoryTracker::current().device(model_->context()->exec.device()).peak;
  in.data<int64_t>()[1] = stop_signal;
  Tensor all = Tensor::empty({kFields * static_cast<int64_t>(world_.size())}, DType::i64);
  world_.all_gather(all, in).wait();
  WorldStatus out;
  const int64_t* v = all.data<int64_t>();
  for (int r = 0; r < world_.size(); ++r) {
    const int64_t* f = v + kFields * r;
    out.peak_memory.push_back(f[0]);
    out.stop_signal = std::max(out.stop_signal, static_cast<int>(f[1]));
  }
  return out;
}

StepsDone run_steps(Trainer& trainer, int64_t first_step, MetricsLog& metrics,
                    const std::function<void(const StepReport&)>& on_step,
                    const std::function<void(const std::string&)>& note) {
  const TrainConfig& run = trainer.config();
  StepsDone s;
  const auto start = Clock::now();
  int64_t tokens = 0;
  double step_seconds = 0;
  bool first_checkpoint = true;
  while (trainer.steps_done() < run.last_step()) {
    StepReport rep;
    rep.result = trainer.step();
    const int64_t step = rep.result.step;
    const bool last = step == run.last_step();
    // Every rank learns here whether any rank was signalled: all stop after this step.
    const Trainer::WorldStatus status = trainer.exchange_status(StopSignals::pending());
    const int stop = status.stop_signal;
    tokens += rep.result.tokens;
    step_seconds += rep.result.times.total;
    if ((run.eval_every > 0 && step % run.eval_every == 0 && !stop) || last) {
      rep.val_loss = trainer.evaluate();
      s.final_val_loss = rep.val_loss;
    }
    rep.peak_memory = status.peak_memory;
    rep.total_steps = run.last_step();
    rep.steps_this_run = step - first_step;
    rep.elapsed_s = seconds_since(start);
    rep.tokens_per_s = static_cast<double>(rep.result.tokens) / rep.result.times.total;
    s.final_loss = rep.result.loss;
    metrics.write(rep);
    on_step(rep);
    std::string written;
    if (!run.save.empty() && ((run.save_every > 0 && step % run.save_every == 0) || last || stop)) {
      written = trainer.checkpoint(run.overwrite && first_checkpoint);
      first_checkpoint = false;
    }
    if (stop) {
      metrics.close();
      note(written.empty() ? format("stopped at step {} by {}: no checkpoint written (no --save)",
                                    step, signal_name(stop))
                           : format("stopped at step {}: checkpoint written to {}", step, written));
      s.stop_signal = stop;
      break;
    }
    if (!written.empty()) note(format("step {}: checkpoint written to {}", step, written));
  }
  metrics.close();
  s.seconds = seconds_since(start);
  s.tokens_per_s = step_seconds > 0 ? static_cast<double>(tokens) / step_seconds : 0;
  return s;
}

}  // namespace weft::train
