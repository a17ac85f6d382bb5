// The --save directory of a run: step-numbered checkpoints and a pointer to
// the latest.
//
//   DIR/step-000020/    a checkpoint (checkpoint.h), written atomically
//   DIR/step-000030/
//   DIR/latest          one line, "step-000030": the checkpoint to resume
//
// A checkpoint is written to its step directory first (atomically, as
// save_checkpoint does); then rank 0 replaces `latest` (a temporary file,
// fsync, rename) and removes the step directories past --keep. A crash at
// any point leaves `latest` naming a complete checkpoint: the new one or the
// one before it.
//
// Wherever a checkpoint is read, a path may name the run directory (its
// `latest` is followed), a step directory, or a checkpoint directory written
// by an older weft (index.json directly in DIR).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "weft/comm/process_group.h"

namespace weft::io {

inline constexpr const char* kLatestFile = "latest";

// "step-000020".
std::string step_dir_name(int64_t step);

// The checkpoint directory `path` names: DIR/<latest> when DIR has a `latest`
// pointer; else, when DIR holds step directories but no pointer (a crash
// before the first pointer was written), the newest complete one; else `path`
// itself. A pointer naming a missing checkpoint, and a directory that is
// empty or holds only the leftovers of an interrupted save, are weft::Errors.
std::string resolve_checkpoint(const std::string& path);

// Whether checkpoint directory `checkpoint` is run directory `run_dir` or
// one of its step directories.
bool in_run_dir(const std::string& checkpoint, const std::string& run_dir);

// Whether `dir` holds a checkpoint a run could resume (a pointer, a complete
// step directory or an older weft's index.json).
bool holds_checkpoint(const std::string& dir);

// Before a run that saves to `dir`: creates it when missing; a file, or a
// directory holding anything but weft checkpoints, is a weft::Error.
void prepare_save_dir(const std::string& dir);

// Collective over `world`, after the checkpoint of `step` was written to
// DIR/step-NNNNNN: rank 0 points DIR/latest at it and removes the step
// directories that are not kept: those past `step` (another run's, or this
// run's before it resumed from an earlier step), all others when
// `drop_others` (the first checkpoint of a run that replaces another), and
// beyond the `keep` newest (0: keep all), and what interrupted saves left
// behind (step-*.tmp-*). A failure on rank 0 is a
// weft::Error on every rank. Returns (on rank 0) the directories removed.
std::vector<std::string> publish_checkpoint(const std::string& dir, int64_t step, int64_t keep,
                                            bool drop_others, comm::ProcessGroup& world);

}  // namespace weft::io
