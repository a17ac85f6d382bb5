// The run loop. Trainer: one rank's part of a data- and tensor-parallel GPT training run.
//
// Layout. The world's ranks form a "tp-dp" grid (TP fastest: with 4 ranks
// and tp 2, TP groups [0,1] [2,3], DP groups [0,2] [1,3]), "tp-gtp-dp" with
// generalized tensor parallelism (--gtp > 1). Each rank seeds its RNG
// tracker with (seed, tp_rank), builds its shard of the model with the TP
// group (and its weights' 1/gtp shards over the gtp group), wraps the
// gradients in bucketed GradSyncs — GTP shards over dp once their deferred
// reduce-scatter is in, every other gradient over the gtp and dp groups
// together (the data group: the ranks that see different data) — and steps
// an AdamW over its parameters (shards: the optimizer state is 1/gtp too).
//
// One optimizer step (step() below):
//   the step's global batch: micro_batch · D · A sequences (D = gtp · dp,
//   A = grad_accum), a function of (data seed, step) only
//   for micro-batch m < A:
//     data rank r takes part m·D + r of the A·D equal parts of the global
//     batch; under --sp batch each TP rank takes its share of that part,
//     otherwise every TP rank of a group passes the same rows. So DP=2 at
//     micro-batch b, DP=1 at 2b and 2 accumulated micro-batches of b all
//     train on the same sequences
//     forward_loss, backward_loss(1/grad_accum); GradSync issues each bucket's
//     all-reduce as soon as its gradients are final, on the last micro-batch
//     only (the others accumulate locally)
//   sync.finish()
//   loss = mean over micro-batches, averaged over the data group: the same on every rank
//   norm = global grad norm over {tp, gtp, dp}, each element counted once
//   (on the CPU its sums run bucket by bucket as the buckets are reduced)
//   a loss or norm that is not finite stops the run (weft::Error naming the step)
//   AdamW step at lr(step) with the clipping factor as its gradient scale
//
// --distributed-optimizer: the GradSyncs reduce-scatter their buckets
// instead (each data rank keeps its 1/D shard of the averaged gradient),
// the norm sums the shards, and optim::DistributedOptimizer updates this
// rank's shard and all-gathers the weights.
//
// A step's batch is a pure function of (data seed, step), so the same
// configuration and seed give bitwise-identical losses, and a run
// resumed from a checkpoint (step, data seed, RNG offsets, optimizer state)
// continues bitwise-identically.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "weft/comm/grid.h"
#include "weft/io/data.h"
#include "weft/nn/gpt.h"
#include "weft/optim/adamw.h"
#include "weft/optim/distributed_optimizer.h"
#include "weft/parallel/rng.h"
#include "weft/train/config.h"
#include "weft/train/layout.h"

namespace weft::train {

class MetricsLog;
struct PipelineState;

// Where one step's time went on this rank, in seconds. comm and gemm are the
// profile totals (time waiting for collectives, time in GEMMs) and overlap
// the phases.
struct StepTimes {
  double forward = 0;
  double backward = 0;  // includes the wait for the DP gradient sync
  double optimizer = 0;
  double comm = 0;
  double gemm = 0;
  double all_to_all = 0;  // MoE layers' expert-parallel token exchange (not in comm)
  // Under --pp: the run of the schedule, waits included (forward and
  // backward are this rank's busy time in it).
  double pipeline = 0;
  double total = 0;
};

struct StepResult {
  int64_t step = 0;      // optimizer steps done, this one included
  double loss = 0;       // mean training loss of the global batch, the same on every rank
  double lr = 0;         // learning rate of this step
  double grad_norm = 0;  // global gradient norm before clipping
  // MoE models: the routers' weighted auxiliary losses, trained on beside
  // `loss` but not in it (nn::Gpt::aux_loss); 0 for dense models.
  double aux_loss = 0;
  int64_t tokens = 0;  // tokens of the global batch
  StepTimes times{};
};

class Trainer {
 public:
  // Collective over `world` (tp · gtp · dp ranks). Builds the grid, the model, the
  // gradient sync and the optimizer, and loads cfg.resume when set. `data`
  // must outlive the trainer.
  Trainer(const TrainConfig& cfg, comm::ProcessGroup& world, const io::Dataset& data);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // One optimizer step (collective).
  StepResult step();
  // Mean loss over the first eval_batches validation batches of a step's
  // global batch size, sliced as training batches are: the same on every
  // rank, and for every layout of the same global batch.
  double evaluate();
  // Writes a checkpoint of this step to `dir` (collective).
  void save(const std::string& dir);
  // Writes a checkpoint of this step to the run directory --save names
  // (DIR/step-NNNNNN, then DIR/latest and --keep; checkpoint_dir.h) and
  // returns its path (collective). drop_others: this is the first checkpoint
  // of a run that replaces another's (--overwrite); the others go.
  std::string checkpoint(bool drop_others);
  // Text continuing `prompt` (ids), the same on every rank (collective).
  std::vector<int32_t> sample(const std::vector<int32_t>& prompt, int64_t tokens, uint64_t seed);
  // Peak CPU bytes of every world rank so far, in world-rank order (collective).
  std::vector<int64_t> peak_memory();
  // What every rank knows after a step (collective): the peak memory of each
  // and the largest stop signal any rank received (0: none), so all ranks
  // agree to stop after the same step. `stop_signal`: this rank's.
  struct WorldStatus {
    std::vector<int64_t> peak_memory{};
    int stop_signal = 0;
  };
  WorldStatus exchange_status(int stop_signal);

  // MoE: the tokens each expert of each MoE layer took in the latest forward,
  // summed over every data rank (collective). Empty for a dense model.
  std::vector<std::vector<int64_t>> expert_load();
  // Optimizer steps taken (counting those before a resume).
  int64_t steps_done() const { return step_; }
  // The ranks that see different sequences: ep · gtp · dp (a data group's
  // cp ranks share theirs, each holding its chunks).
  int dp_size() const { return data_group_->size() / cfg_.cp; }
  const TrainConfig& config() const { return cfg_; }
  const comm::Grid& grid() const { return *grid_; }
  // The model; under --pp this rank's first stage (chunk 0; see chunk()).
  nn::Gpt& model() { return *model_; }
  // AdamW (an error under --distributed-optimizer: distributed_optimizer()).
  optim::AdamW& optimizer();
  // Under --distributed-optimizer, else null.
  optim::DistributedOptimizer* distributed_optimizer() { return distributed_.get(); }
  // Pipeline parallelism (pipeline_step.h): whether this run has stages,
  // and this rank's chunk v (0 .. --vpp - 1; chunk 0 is model()).
  bool pipelined() const { return pipeline_ != nullptr; }
  // The schedule, links and chunks (null without a pipeline).
  const PipelineState* pipeline() const { return pipeline_.get(); }
  // The whole model's parameters (every stage's under --pp).
  int64_t num_parameters_global();
  nn::Gpt& chunk(int v);
  parallel::RngTracker& rng() { return rng_; }
  comm::ProcessGroup& world() { return world_; }

 private:
  // where: appended to the message (under --pp, where the activations
  // first stop being finite: pipeline_locate_nonfinite).
  void check_finite(double loss, double norm, const std::string& where = {}) const;
  // The rows of micro-batch `micro` this rank takes: part m·D + r of the
  // A·D equal parts of a global batch.
  io::BatchSlice part(int64_t micro) const;
  // Pipeline parallelism (pipeline_step.cpp): builds the chunks past the
  // first, the schedule and the links (collective); runs a step's
  // micro-batches through the schedule (loss_sum: the last stage's sum, 0
  // on the others; aux_sum: this rank's stages'); sums a tied embedding's
  // gradient over the embedding group; the sum of the losses of `batches`
  // (one per micro-batch) run forward, the same on every stage.
  void setup_pipeline(const parallel::ContextPtr& context);
  void pipeline_microbatches(Tensor& loss_sum, double& aux_sum, StepTimes& times);
  void measure_pipeline_draws(const io::Batch& b);
  void pipeline_finish_gradients();
  double pipeline_evaluate_sum(const std::vector<io::Batch>& batches);
  // The executor's receive buffers for micro-batch m at a stage: the stream
  // (activation or its gradient) of `batches[m]`'s shape.
  std::function<Tensor(int, int, bool)> stream_buffers(const std::vector<io::Batch>& batches);
  // After a step whose loss or norm is not finite (collective over the
  // world): reruns the step's forwards checking every layer's output and
  // names the first stage and layer whose activations are not finite.
  std::string pipeline_locate_nonfinite();

  TrainConfig cfg_;
  comm::ProcessGroup& world_;
  const io::Dataset& data_;
  std::unique_ptr<comm::Grid> grid_;
  std::shared_ptr<comm::ProcessGroup> data_group_;  // ep, gtp and dp together
  // Delayed scaling's amax group under --amax-group tp: the ranks of one
  // model replica, tp and gtp together (the tp group without GTP), so that
  // every rank of a gtp group holds the same scales.
  std::shared_ptr<comm::ProcessGroup> replica_group_;
  parallel::RngTracker rng_;
  std::unique_ptr<nn::Gpt> model_;
  std::shared_ptr<PipelineState> pipeline_;  // null without --pp / --vpp
  std::vector<nn::Parameter*> params_;
  std::unique_ptr<GradSyncs> syncs_;
  std::unique_ptr<optim::AdamW> optimizer_;  // exactly one of optimizer_ and distributed_
  std::unique_ptr<optim::DistributedOptimizer> distributed_;
  // The groups the gradient norm sums over, and on the CPU its sums bucket by
  // bucket as the GradSyncs reduce them (null on a GPU: one pass after the sync).
  optim::Groups norm_groups_;
  std::unique_ptr<optim::BucketNormSums> norm_sums_;
  // The step's scalars where the model runs (kernels/step_scalars.h), read
  // to the host once at the end of a step: see StepScalars in run_loop.cpp.
  Tensor scalars_;
  std::unique_ptr<io::Sampler> sampler_;
  io::BatchSlice slice_{};
  int64_t step_ = 0;
  // The step of the checkpoint that --save holds (-1: none written yet).
  int64_t saved_step_ = -1;
  uint64_t data_seed_ = 0;
};

// What a run reports to its caller, on world rank 0.
struct StepReport {
  StepResult result{};
  std::optional<double> val_loss{};    // on evaluation steps
  std::vector<int64_t> peak_memory{};  // bytes per world rank
  int64_t total_steps = 0;
  int64_t steps_this_run = 0;  // steps since the start (or resume) of this run
  double tokens_per_s = 0;
  double elapsed_s = 0;  // since the first step of this run
};

// How run_steps ended, on this rank (loss and signal agree on every rank).
struct StepsDone {
  double final_loss = 0;
  std::optional<double> final_val_loss{};
  double seconds = 0;       // wall time of the steps, evaluations and checkpoints
  double tokens_per_s = 0;  // over the training steps alone
  // The signal that stopped the run after its step (0: ran to its end).
  int stop_signal = 0;
};

// The steps from trainer.steps_done() to the config's last_step() (collective):
// a validation loss every eval_every steps and at the last, a checkpoint
// every save_every steps, at the last and when a signal stops the run (when
// --save is set). Every step's report goes to `metrics` and `on_step`,
// notes (checkpoints written, the stop) to `note`. `first_step`: the step the
// run started (or resumed) at.
StepsDone run_steps(Trainer& trainer, int64_t first_step, MetricsLog& metrics,
                    const std::function<void(const StepReport&)>& on_step,
                    const std::function<void(const std::string&)>& note);

}  // namespace weft::train
