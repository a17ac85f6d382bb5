// Pipeline parallelism in the trainer (--pp, --vpp, --pp-schedule,
// --pp-layers): which layers each stage holds, and the state a Trainer keeps
// to run its stages through the schedule (parallel/pipeline/). The step
// itself is Trainer::pipeline_microbatches (pipeline_step.cpp).
//
// A rank at pipeline position r holds the chunks v = 0..V-1, chunk v being
// global stage v·P + r (parallel/pipeline/schedule.h). Under --pp the step's
// --grad-accum micro-batches are the schedule's M: every stage sees each
// micro-batch once, forward and backward, in the schedule's order. The last
// stage's losses add up as the unpipelined loop's do (micro-batch order);
// each stage's MoE auxiliary losses are summed over the pipeline group; the
// gradient norm sums over it too. A tied head's copy of wte on the last
// stage has its gradient summed with the first stage's over the embedding
// group {first, last} after the data-parallel sync, as Megatron does.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "weft/nn/gpt.h"
#include "weft/parallel/pipeline/executor.h"
#include "weft/parallel/pipeline/schedule.h"
#include "weft/train/config.h"

namespace weft::train {

// The layers of global stage `stage` under cfg's --pp, --vpp, --pp-layers.
nn::GptStage pipeline_stage(const TrainConfig& cfg, int stage);

// "pipeline 1f1b: 2 stages, 4 micro-batches in flight; layers per stage
// [2,2] (the embedding counted as a layer of stage 0, the head and loss as
// one of stage 1)": the run header's line.
std::string describe_pipeline(const TrainConfig& cfg);

// True when cfg runs a pipeline (--pp or --vpp above 1).
inline bool pipelined(const TrainConfig& cfg) { return cfg.pp > 1 || cfg.vpp > 1; }

struct PipelineState {
  parallel::pipeline::PipelineSchedule schedule;
  parallel::pipeline::PipelineSchedule forward_only;  // evaluation: the forwards alone
  parallel::pipeline::PipelineLinks links;
  std::shared_ptr<comm::ProcessGroup> pp;  // this rank's pipeline group
  // First and last stage of this pipeline when the head is tied; null elsewhere.
  std::shared_ptr<comm::ProcessGroup> embedding;
  int64_t parameters_global = 0;  // the whole model's, every stage's together
  // The parameters the gradient norm counts: every chunk's but a tied head's copy of wte.
  std::vector<nn::Parameter*> norm_params;
  // Dropout keyed by micro-batch (--dropout > 0): the random numbers one
  // micro-batch's forward draws on each global stage, per stream, measured
  // once (first step); before F(m, s) the streams are set where the
  // unpipelined loop's forward of micro-batch m reaches stage s's first layer.
  bool draws_known = false;
  std::vector<std::map<std::string, uint64_t>> draws;  // per global stage
  // Chunks 1..V-1 of this rank (chunk 0 is the Trainer's model).
  std::vector<std::unique_ptr<nn::Gpt>> more_chunks;
};

}  // namespace weft::train
