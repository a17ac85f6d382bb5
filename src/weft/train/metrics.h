// Where a run's per-step numbers go: the --metrics JSONL file (one JSON object
// per step) and the --tensorboard event file. The run loop hands every step's
// report to one MetricsLog on world rank 0; other ranks hold an empty one.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>

#include "weft/io/json.h"
#include "weft/train/run_loop.h"

namespace weft::io {
class EventFileWriter;
}  // namespace weft::io

namespace weft::train {

struct MetricsOptions {
  std::string jsonl{};        // --metrics FILE; empty: none
  bool append = false;        // append to FILE (a resumed run) instead of truncating it
  std::string tensorboard{};  // --tensorboard DIR; empty: none
  int64_t log_every = 0;      // event file flushed at these steps, evaluations and the last step
};

// The JSONL line of one step: step, loss, val_loss (on evaluation steps), lr,
// grad_norm, tokens_per_s, peak_memory_bytes, step_seconds.
io::Json metrics_line(const StepReport& r);

class MetricsLog {
 public:
  MetricsLog();  // writes nothing
  // Opens what `options` names; an unwritable file or directory is a weft::Error.
  explicit MetricsLog(const MetricsOptions& options);
  ~MetricsLog();
  MetricsLog(MetricsLog&&) noexcept;
  MetricsLog& operator=(MetricsLog&&) noexcept;

  // One step: a JSONL line (flushed) and the scalars loss, val_loss (when
  // evaluated), lr, grad_norm, tokens_per_s. A failed write is a weft::Error.
  void write(const StepReport& r);
  // Flushes and closes both files; errors are weft::Error.
  void close();

 private:
  MetricsOptions options_{};
  std::ofstream jsonl_{};
  std::unique_ptr<io::EventFileWriter> events_{};
};

}  // namespace weft::train
