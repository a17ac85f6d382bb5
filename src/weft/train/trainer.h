// run_training: the whole job of `weft train` (its parts: launch.h, run_start.h,
// run_loop.h, metrics.h, load_model.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "weft/io/data.h"
#include "weft/train/config.h"
#include "weft/train/run_loop.h"

namespace weft::train {

// The training data `cfg` names (its --data file, or the fortunes corpus),
// split for its context length; a weft::Error when the model's vocabulary
// cannot hold the data's tokens.
io::Dataset load_dataset(const TrainConfig& cfg);

struct TrainCallbacks {
  // Once, before the first step: what is being trained, on which layout.
  std::function<void(const std::string&)> on_start{};
  std::function<void(const StepReport&)> on_step{};
  // Notes worth a line (checkpoints written, a resume, data that changed).
  std::function<void(const std::string&)> on_note{};
};

struct TrainSummary {
  bool reporter = false;   // this process is world rank 0's: the fields below are filled
  int64_t first_step = 0;  // steps done before this run (a resume)
  int64_t steps = 0;       // steps done at the end
  double final_loss = 0;
  std::optional<double> first_val_loss{};
  std::optional<double> final_val_loss{};
  double seconds = 0;       // wall time of the steps, evaluations and checkpoints
  double tokens_per_s = 0;  // over the training steps alone
  std::string sample{};     // generated text (byte vocabularies, or the run's tokenizer)
  // Whether `sample` holds the text.
  bool sample_is_text = false;
  std::vector<int32_t> sample_ids{};
  // The signal (SIGINT, SIGTERM) that stopped the run after step `steps`, 0
  // when it ran to its end; set on every process of the world.
  int stop_signal = 0;
};

// The whole job of `weft train`: loads the data, starts the world (local
// threads, or the mpirun world), trains cfg.steps steps with evaluation,
// metrics (cfg.metrics: one JSON line per step), checkpoints and the final
// sample. Callbacks run on world rank 0; the summary is rank 0's.
//
// Where it starts: cfg.resume when set; else the checkpoint in cfg.save when
// that is of the same run (model shape, data and seed), which it resumes and
// says so; a checkpoint of another run there is a weft::Error (unless
// cfg.overwrite) that leaves it untouched. A resumed run given another
// --steps keeps the saved learning-rate schedule unless cfg.reset_schedule.
// Its metrics file loses the lines past the resumed step before it appends.
//
// SIGINT / SIGTERM (stop_signal.h): every rank finishes the step it is in,
// the ranks agree on the step, a checkpoint is written when cfg.save is set,
// and the run ends with TrainSummary::stop_signal set (no sample).
TrainSummary run_training(const TrainConfig& cfg, const TrainCallbacks& callbacks = {});

}  // namespace weft::train
