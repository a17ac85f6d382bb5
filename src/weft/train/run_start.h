// Where a training run starts, decided before its world starts, what a
// resumed run does to its metrics file, and the lines a run starts with
// (run_training in trainer.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weft/io/data.h"
#include "weft/train/config.h"

namespace weft::train {

class Trainer;

// Saved with a checkpoint's settings (Trainer::save), to tell a resumed run
// what changed and whether --save holds the same run.
inline constexpr const char* kFingerprintKey = "data-fingerprint";
inline constexpr const char* kBatchKey = "sequences-per-step";

// Decides where `run` starts on `data`: prepares --save (checkpoint_dir.h);
// when it holds a checkpoint of the same run (model shape, data, seed) and
// no --resume is given, sets run.resume to it; a checkpoint of another run
// there is a weft::Error naming both (unless run.overwrite), and so is one
// of this run that already reached --steps. A resumed run given another
// --steps keeps the saved schedule (sets run.schedule_steps) unless
// run.reset_schedule. Returns the lines that say what was decided.
std::vector<std::string> plan_start(TrainConfig& run, const io::Dataset& data);

// Drops the lines of the metrics file past `step` (and any torn line), so a
// resumed run never writes a step twice; the file is replaced atomically.
// Returns how many went.
int64_t truncate_metrics(const std::string& path, int64_t step);

// What is being trained on which layout: the model, the data, the ranks and
// the steps, a few lines.
std::string describe_run(Trainer& trainer, const io::Dataset& data);

// What a run resumed from run.resume at `first_step` says: where it resumed,
// and whether the data or the sequences per step (at data-parallel size
// `dp`) differ from the saved run's.
std::vector<std::string> resume_notes(const TrainConfig& run, const io::Dataset& data,
                                      int64_t first_step, int dp);

}  // namespace weft::train
