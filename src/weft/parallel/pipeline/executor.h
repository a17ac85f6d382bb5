// The pipeline executor: runs one rank's action list (schedule.h) with the
// stage's passes given as callbacks, moving activations and gradients
// between stages by asynchronous ProcessGroup send/recv.
//
// Transfers. A group runs its operations in issue order, and a send is not
// done until its receiver takes it; so that a rank's sends never queue
// behind its receives, every (direction, neighbour) pair has a group of its
// own (PipelineLinks): activations to the next rank, from the previous,
// gradients to the previous, from the next. Each is a FIFO channel whose two
// ends the schedules keep in the same order (simulate() checks it). A
// receive is posted one compute action ahead (its transfer runs while the
// action before it computes); a send is posted as soon as its tensor exists
// and waited for only at the end of the step, so a stage never waits on its
// own send. Every wait is bounded by the group's timeout and its error names
// the stage and the micro-batch waited for. Transfers between two chunks of
// one rank (interleaved at --pp 1) hand the tensor over in memory.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "weft/comm/process_group.h"
#include "weft/parallel/pipeline/schedule.h"

namespace weft::parallel::pipeline {

struct PipelineLinks {
  int rank = 0;  // this rank's place in its pipeline group
  int size = 1;
  // Sender is rank 0 and receiver rank 1 of each; null at size 1.
  std::shared_ptr<comm::ProcessGroup> activation_out, activation_in, grad_out, grad_in;

  // Collective over `world`: `pp_groups` are every pipeline group as world
  // ranks in stage order (GridLayout::groups("pp")).
  static PipelineLinks create(comm::ProcessGroup& world,
                              const std::vector<std::vector<int>>& pp_groups);
};

// The stage's passes, by micro-batch and global stage.
struct StageCallbacks {
  // input: the activation received from the previous stage (undefined on
  // stage 0). Returns the activation to send (ignored on the last stage).
  std::function<Tensor(int microbatch, int stage, const Tensor& input)> forward;
  // dy: the gradient received from the next stage (undefined on the last).
  // Returns the gradient of the stage's input (ignored on stage 0).
  std::function<Tensor(int microbatch, int stage, const Tensor& dy)> backward;
  // A split backward (zero-bubble): the input gradient, as `backward`, then
  // later the weight gradient.
  std::function<Tensor(int microbatch, int stage, const Tensor& dy)> backward_input;
  std::function<void(int microbatch, int stage)> backward_weight;
  // An empty tensor to receive the activation entering `stage` (grad false)
  // or the gradient of its output (grad true).
  std::function<Tensor(int microbatch, int stage, bool grad)> buffer;
};

struct ExecutorStats {
  double busy_s = 0;   // time in the callbacks' compute
  double total_s = 0;  // the whole run, waits included
};

// Runs this rank's list of `schedule` (collective over the pipeline group:
// every rank of it runs its own list of the same schedule).
ExecutorStats run_schedule(const PipelineSchedule& schedule, const PipelineLinks& links,
                           const StageCallbacks& callbacks);

}  // namespace weft::parallel::pipeline
