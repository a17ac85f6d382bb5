#include "weft/train/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "weft/comm/world.h"
#include "weft/core/memory.h"
#include "weft/core/profile.h"
#include "weft/optim/grad_norm.h"
#include "weft/train/checkpoint.h"
#include "weft/train/generate.h"
#include "weft/train/hf_export.h"
#include "weft/train/schedule.h"
#include "weft/train/tokenizer.h"

namespace weft::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Saved with a checkpoint's settings, to tell a resumed run what changed.
constexpr const char* kFingerprintKey = "data-fingerprint";
constexpr const char* kBatchKey = "sequences-per-step";

}  // namespace

void load_weights(const std::string& path, comm::ProcessGroup& world, const comm::Grid& grid,
                  nn::Gpt& model, ReadOptions options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    load_checkpoint(path, world, grid, model, nullptr, options);
    return;
  }
  WEFT_CHECK(fs::exists(path, ec),
             "{} does not exist: give a checkpoint directory (weft train --save) or a GPT-2 "
             ".safetensors file (weft checkpoint export)",
             path);
  load_hf(path, model, options.allow_nonfinite);
}

InferenceModel load_for_inference(const std::string& path, DType compute, ReadOptions options) {
  InferenceModel m;
  const Json config = read_checkpoint_config(path);
  TrainConfig cfg;
  apply_settings(cfg, shape_settings(config), path);
  cfg.tp = 1;
  cfg.dtype = compute;
  m.world = comm::init_world();
  WEFT_CHECK(m.world->size() == 1,
             "evaluation and generation run on one process: start weft without mpirun");
  m.grid = std::make_unique<comm::Grid>(
      *m.world, "tp-dp", std::vector<std::pair<std::string, int>>{{"tp", 1}, {"dp", 1}});
  m.model = std::make_unique<nn::Gpt>(model_config(cfg, nullptr));
  load_weights(path, *m.world, *m.grid, *m.model, options);
  return m;
}

Dataset load_dataset(const TrainConfig& cfg) {
  TokenData data = cfg.data.empty() ? default_corpus() : load_tokens(cfg.data);
  WEFT_CHECK(data.vocab_needed() <= cfg.vocab,
             "{} holds token id {}, but the model's vocabulary is {}: pass --vocab {} (GPT-2 "
             "tokens: --preset gpt2-124m)",
             data.source, data.vocab_needed() - 1, cfg.vocab, data.vocab_needed());
  return Dataset(std::move(data), cfg.seq, cfg.val_fraction);
}

Trainer::Trainer(const TrainConfig& cfg, comm::ProcessGroup& world, const Dataset& data)
    : cfg_(cfg), world_(world), data_(data), data_seed_(cfg.seed) {
  validate(cfg_);
  WEFT_CHECK(world.size() % cfg_.tp == 0,
             "the world of {} ranks is not divisible by --tp {}: start a multiple of {} ranks",
             world.size(), cfg_.tp, cfg_.tp);
  const int dp = world.size() / cfg_.tp;
  WEFT_CHECK(cfg_.dp == 0 || cfg_.dp == dp,
             "--dp {} does not match the world: {} ranks at --tp {} make dp {}", cfg_.dp,
             world.size(), cfg_.tp, dp);
  WEFT_CHECK(data.seq_len() == cfg_.seq,
             "the dataset is split for windows of {}, the model's context is {}", data.seq_len(),
             cfg_.seq);
  grid_ = std::make_unique<comm::Grid>(
      world, "tp-dp", std::vector<std::pair<std::string, int>>{{"tp", cfg_.tp}, {"dp", dp}});
  const int tp_rank = grid_->rank_in("tp");
  rng_ = parallel::RngTracker(cfg_.seed, tp_rank);
  model_ = std::make_unique<nn::Gpt>(model_config(cfg_, grid_->group_ptr("tp")));
  params_ = model_->parameters();
  const auto bucket = static_cast<int64_t>(cfg_.bucket_mb * (1 << 20));
  sync_ = std::make_unique<optim::GradSync>(params_, grid_->group_ptr("dp"),
                                            std::max<int64_t>(bucket, 1));
  optimizer_ = std::make_unique<optim::AdamW>(
      params_, optim::AdamWOptions{.weight_decay = static_cast<float>(cfg_.weight_decay)});
  const bool batch_sp = cfg_.sp == nn::SequenceParallel::batch;
  slice_ = {.dp_rank = grid_->rank_in("dp"),
            .dp_size = dp,
            .sub_rank = batch_sp ? tp_rank : 0,
            .sub_size = batch_sp ? cfg_.tp : 1};
  if (!cfg_.init.empty()) load_weights(cfg_.init, world, *grid_, *model_);
  if (!cfg_.resume.empty()) {
    TrainState state = load_checkpoint(cfg_.resume, world, *grid_, *model_, optimizer_.get());
    step_ = state.step;
    if (cfg_.resume == cfg_.save) saved_step_ = step_;
    data_seed_ = state.data_seed;
    rng_.set_state(state.rng);
    WEFT_CHECK(step_ < cfg_.steps,
               "the checkpoint in {} is at step {} and --steps is {}: pass a larger --steps to "
               "continue training",
               cfg_.resume, step_, cfg_.steps);
  }
  sampler_ = std::make_unique<Sampler>(data_, data_seed_, cfg_.sequences_per_step(dp));
}

Trainer::~Trainer() = default;

void Trainer::check_finite(double loss, double norm) const {
  const bool loss_bad = !std::isfinite(loss);
  WEFT_CHECK(!loss_bad && std::isfinite(norm),
             "step {}: the {} is not finite ({}); training stopped before this step's update{}. "
             "Lower --lr, keep --grad-clip on, or resume from an earlier checkpoint",
             step_ + 1, loss_bad ? "training loss" : "gradient norm", loss_bad ? loss : norm,
             saved_step_ < 0
                 ? std::string()
                 : format(" (the checkpoint of step {} in {} is kept)", saved_step_, cfg_.save));
}

StepResult Trainer::step() {
  const auto t0 = Clock::now();
  const profile::Totals p0 = profile::totals();
  StepResult r;
  const int64_t accum = cfg_.grad_accum;
  auto ready = [this](const std::vector<nn::Parameter*>& ps) {
    for (const nn::Parameter* p : ps) sync_->mark_ready(p);
  };
  double loss_sum = 0;
  for (int64_t m = 0; m < accum; ++m) {
    Batch b = sampler_->next_batch(step_, 0, part(m));
    nn::Ctx ctx(&rng_, true);
    sync_->set_sync(m == accum - 1);
    auto t = Clock::now();
    loss_sum += model_->forward_loss(ctx, b.inputs, b.targets);
    r.times.forward += seconds_since(t);
    t = Clock::now();
    model_->backward_loss(ctx, 1.0f / static_cast<float>(accum), ready);
    r.times.backward += seconds_since(t);
  }
  auto t = Clock::now();
  sync_->finish();
  r.times.backward += seconds_since(t);

  t = Clock::now();
  Tensor loss = Tensor::from({1}, std::vector<float>{static_cast<float>(loss_sum / accum)});
  grid_->group("dp").all_reduce(loss, comm::ReduceOp::avg).wait();
  r.loss = loss.item(0);
  r.grad_norm = optim::global_grad_norm(
      params_, {{"tp", grid_->group_ptr("tp")}, {"dp", grid_->group_ptr("dp")}});
  check_finite(r.loss, r.grad_norm);
  LrSchedule schedule{
      .lr = cfg_.lr, .warmup = cfg_.warmup_steps(), .total = cfg_.steps, .min_lr = cfg_.min_lr};
  r.lr = schedule.at(step_);
  optimizer_->step(static_cast<float>(r.lr), optim::clip_scale(r.grad_norm, cfg_.grad_clip));
  model_->zero_grad();
  r.times.optimizer = seconds_since(t);

  ++step_;
  r.step = step_;
  r.tokens = cfg_.sequences_per_step(grid_->size("dp")) * cfg_.seq;
  const profile::Totals p1 = profile::totals();
  r.times.comm = p1.comm - p0.comm;
  r.times.gemm = p1.gemm - p0.gemm;
  r.times.total = seconds_since(t0);
  return r;
}

BatchSlice Trainer::part(int64_t micro) const {
  BatchSlice s = slice_;
  s.dp_rank = static_cast<int>(micro) * slice_.dp_size + slice_.dp_rank;
  s.dp_size = static_cast<int>(cfg_.grad_accum) * slice_.dp_size;
  return s;
}

double Trainer::evaluate() {
  const int64_t batch = cfg_.sequences_per_step(grid_->size("dp"));
  const int64_t n = data_.val_batches(batch, cfg_.eval_batches);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t m = 0; m < cfg_.grad_accum; ++m) {
      Batch b = data_.val_batch(i, batch, part(m));
      nn::Ctx ctx(nullptr, false);
      sum += model_->forward_loss(ctx, b.inputs, b.targets);
    }
  }
  const double local = sum / static_cast<double>(n * cfg_.grad_accum);
  Tensor mean = Tensor::from({1}, std::vector<float>{static_cast<float>(local)});
  grid_->group("dp").all_reduce(mean, comm::ReduceOp::avg).wait();
  return mean.item(0);
}

void Trainer::save(const std::string& dir) {
  Json config = cfg_.to_json();
  config[kFingerprintKey] = std::to_string(data_.data().fingerprint());
  config[kBatchKey] = cfg_.sequences_per_step(grid_->size("dp"));
  TrainState state{.step = step_, .data_seed = data_seed_, .rng = rng_.state(), .config = config};
  save_checkpoint(dir, world_, *grid_, *model_, optimizer_.get(), state);
  if (dir == cfg_.save) saved_step_ = step_;
}

std::vector<int32_t> Trainer::sample(const std::vector<int32_t>& prompt, int64_t tokens,
                                     uint64_t seed) {
  return generate(*model_, prompt, {.tokens = tokens, .seed = seed});
}

std::vector<int64_t> Trainer::peak_memory() {
  const int64_t peak = MemoryTracker::current().device(Device::cpu()).peak;
  std::vector<int32_t> mine{static_cast<int32_t>(peak >> 31),
                            static_cast<int32_t>(peak & 0x7fffffff)};
  Tensor in = Tensor::from_i32({2}, mine);
  Tensor all = Tensor::empty({2 * static_cast<int64_t>(world_.size())}, DType::i32);
  world_.all_gather(all, in).wait();
  std::vector<int64_t> out;
  const int32_t* v = all.data<int32_t>();
  for (int r = 0; r < world_.size(); ++r) {
    out.push_back((static_cast<int64_t>(v[2 * r]) << 31) | static_cast<int64_t>(v[2 * r + 1]));
  }
  return out;
}

namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string describe(Trainer& t, const Dataset& data) {
  const TrainConfig& c = t.config();
  const comm::Grid& g = t.grid();
  const double params = static_cast<double>(t.model().num_parameters_global()) / 1e6;
  const nn::GptConfig p = nn::gpt_preset(c.preset);
  const bool is_preset = p.layers == c.layers && p.width == c.width && p.heads == c.heads &&
                         p.seq == c.seq && p.vocab == c.vocab;
  return format(
      "model {}: {} layers, width {}, {} heads, context {}, vocab {} ({}M parameters), {}\n"
      "data  {}: {} tokens ({} train, {} validation)\n"
      "ranks {} on the {} backend: tp {} x dp {}, sp {}\n"
      "steps {}: {} sequences x {} tokens per step (micro-batch {} x dp {} x accum {}), lr {} "
      "(warmup {}, cosine to {})",
      is_preset ? c.preset : "(custom)", c.layers, c.width, c.heads, c.seq, c.vocab,
      fixed(params, 2), dtype_name(c.dtype), data.data().source, data.data().size(),
      data.train().size(), data.val().size(), t.world().size(), t.world().backend(), g.size("tp"),
      g.size("dp"), nn::sequence_parallel_name(c.sp), c.steps, c.sequences_per_step(g.size("dp")),
      c.seq, c.micro_batch, g.size("dp"), c.grad_accum, c.lr, c.warmup_steps(), c.min_lr_value());
}

Json metrics_line(const StepReport& r) {
  Json j = Json::object();
  j["step"] = r.result.step;
  j["loss"] = r.result.loss;
  if (r.val_loss) j["val_loss"] = *r.val_loss;
  j["lr"] = r.result.lr;
  j["grad_norm"] = r.result.grad_norm;
  j["tokens_per_s"] = r.tokens_per_s;
  Json peak = Json::array();
  for (int64_t b : r.peak_memory) peak.push_back(b);
  j["peak_memory_bytes"] = std::move(peak);
  j["step_seconds"] = r.result.times.total;
  return j;
}

// The prompt of the end-of-run sample: text through the byte tokenizer for
// byte vocabularies, else GPT-2's <|endoftext|> (or id 0).
std::vector<int32_t> sample_prompt(const TrainConfig& c) {
  if (c.vocab == ByteTokenizer::kVocabSize) {
    return ByteTokenizer().encode(c.sample_prompt.empty() ? "\n" : c.sample_prompt);
  }
  return {c.vocab == 50257 ? 50256 : 0};
}

// The world size an MPI launcher announces in the environment (0: unknown).
int mpi_world_size() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    if (const char* s = std::getenv(v); s && *s) return std::atoi(s);
  }
  return 0;
}

// Fails before training when the checkpoint could not be written at the end.
void prepare_save_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(dir, ec)) {
    WEFT_CHECK(fs::exists(fs::path(dir) / "index.json", ec) || fs::is_empty(dir, ec),
               "--save {} is a directory that is not a weft checkpoint (no index.json): choose a "
               "new directory",
               dir);
    return;
  }
  WEFT_CHECK(!fs::exists(dir, ec), "--save {} exists and is not a directory: pass a directory",
             dir);
  fs::create_directories(dir, ec);
  WEFT_CHECK(!ec, "cannot create the --save directory {}: {}", dir, ec.message());
}

}  // namespace

TrainSummary run_training(const TrainConfig& cfg, const TrainCallbacks& cb) {
  validate(cfg);
  const bool under_mpi = comm::launched_by_mpi();
  WEFT_CHECK(cfg.backend != "mpi" || under_mpi,
             "--backend mpi runs one process per rank: start it with `mpirun -np N weft train "
             "...`");
  WEFT_CHECK(cfg.backend != "local" || !under_mpi,
             "--backend local runs the ranks as threads of one process: start weft without "
             "mpirun, or use --backend mpi");
  if (under_mpi) {
    // Checked before MPI starts, so every process ends with this error alone.
    const int world = mpi_world_size();
    WEFT_CHECK(world <= 0 || world % cfg.tp == 0,
               "mpirun started {} processes, not a multiple of --tp {}: use mpirun -np {}", world,
               cfg.tp, (world / cfg.tp + 1) * cfg.tp);
    WEFT_CHECK(
        world <= 0 || cfg.dp == 0 || cfg.dp * cfg.tp == world,
        "--tp {} x --dp {} needs {} processes, mpirun started {}: leave --dp out to infer it",
        cfg.tp, cfg.dp, cfg.tp * cfg.dp, world);
  }
  Dataset data = load_dataset(cfg);
  if (!cfg.save.empty()) prepare_save_dir(cfg.save);
  const int local_ranks = cfg.tp * (cfg.dp ? cfg.dp : 1);
  TrainSummary summary;
  comm::run_world(local_ranks, [&](comm::ProcessGroup& world) {
    Trainer trainer(cfg, world, data);
    const bool lead = world.rank() == 0;
    auto note = [&](const std::string& s) {
      if (lead && cb.on_note) cb.on_note(s);
    };
    std::ofstream metrics;
    if (lead && !cfg.metrics.empty()) {
      metrics.open(cfg.metrics, cfg.resume.empty() ? std::ios::trunc : std::ios::app);
      WEFT_CHECK(metrics.good(), "cannot write the --metrics file {}", cfg.metrics);
    }
    if (lead && cb.on_start) cb.on_start(describe(trainer, data));
    TrainSummary s;
    s.first_step = trainer.steps_done();
    if (!cfg.resume.empty()) {
      note(format("resumed from {} at step {}", cfg.resume, s.first_step));
      const Json saved_config = read_checkpoint_config(cfg.resume);
      const Json* saved = saved_config.find(kFingerprintKey);
      if (saved && saved->is_string() &&
          saved->as_string() != std::to_string(data.data().fingerprint())) {
        note(
            format("note: {} is not the data {} was trained on; the batches differ from those "
                   "the saved run would have seen",
                   data.data().source, cfg.resume));
      }
      const Json* batch = saved_config.find(kBatchKey);
      const int64_t now = cfg.sequences_per_step(trainer.grid().size("dp"));
      if (batch && batch->is_integer() && batch->as_int() != now) {
        note(
            format("note: {} trained on {} sequences per step, this run on {} (micro-batch {} x "
                   "dp {} x accum {}): set --micro-batch or --grad-accum to keep the batch",
                   cfg.resume, batch->as_int(), now, cfg.micro_batch, trainer.grid().size("dp"),
                   cfg.grad_accum));
      }
    }
    WEFT_CHECK(cfg.stop_at == 0 || cfg.stop_at > s.first_step,
               "--stop-at {} is not after the checkpoint's step {}: pass a later step", cfg.stop_at,
               s.first_step);
    s.first_val_loss = trainer.evaluate();
    note(format("step {}: val loss {}", s.first_step, fixed(*s.first_val_loss, 4)));
    const auto start = Clock::now();
    int64_t tokens = 0;
    double step_seconds = 0;
    while (trainer.steps_done() < cfg.last_step()) {
      StepReport rep;
      rep.result = trainer.step();
      const int64_t step = rep.result.step;
      const bool last = step == cfg.last_step();
      tokens += rep.result.tokens;
      step_seconds += rep.result.times.total;
      if ((cfg.eval_every > 0 && step % cfg.eval_every == 0) || last) {
        rep.val_loss = trainer.evaluate();
        s.final_val_loss = rep.val_loss;
      }
      rep.peak_memory = trainer.peak_memory();
      rep.total_steps = cfg.last_step();
      rep.steps_this_run = step - s.first_step;
      rep.elapsed_s = seconds_since(start);
      rep.tokens_per_s = static_cast<double>(rep.result.tokens) / rep.result.times.total;
      s.final_loss = rep.result.loss;
      if (metrics.is_open()) {
        metrics << metrics_line(rep).dump() << "\n";
        metrics.flush();
      }
      if (lead && cb.on_step) cb.on_step(rep);
      if (!cfg.save.empty() && ((cfg.save_every > 0 && step % cfg.save_every == 0) || last)) {
        trainer.save(cfg.save);
        note(format("step {}: checkpoint written to {}", step, cfg.save));
      }
    }
    s.steps = trainer.steps_done();
    s.seconds = seconds_since(start);
    s.tokens_per_s = step_seconds > 0 ? static_cast<double>(tokens) / step_seconds : 0;
    if (cfg.sample_tokens > 0) {
      s.sample_ids = trainer.sample(sample_prompt(cfg), cfg.sample_tokens, cfg.seed);
      if (cfg.vocab == ByteTokenizer::kVocabSize) s.sample = ByteTokenizer().decode(s.sample_ids);
    }
    if (lead) {
      s.reporter = true;
      summary = std::move(s);
    }
  });
  return summary;
}

}  // namespace weft::train
