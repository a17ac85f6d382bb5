#include "weft/train/metrics.h"

#include <utility>

#include "weft/core/error.h"
#include "weft/io/tensorboard.h"

namespace weft::train {

io::Json metrics_line(const StepReport& r) {
  io::Json j = io::Json::object();
  j["step"] = r.result.step;
  j["loss"] = r.result.loss;
  if (r.val_loss) j["val_loss"] = *r.val_loss;
  j["lr"] = r.result.lr;
  j["grad_norm"] = r.result.grad_norm;
  if (r.result.aux_loss != 0) j["aux_loss"] = r.result.aux_loss;
  j["tokens_per_s"] = r.tokens_per_s;
  io::Json peak = io::Json::array();
  for (int64_t b : r.peak_memory) peak.push_back(b);
  j["peak_memory_bytes"] = std::move(peak);
  j["step_seconds"] = r.result.times.total;
  return j;
}

MetricsLog::MetricsLog() = default;
MetricsLog::~MetricsLog() = default;
MetricsLog::MetricsLog(MetricsLog&&) noexcept = default;
MetricsLog& MetricsLog::operator=(MetricsLog&&) noexcept = default;

MetricsLog::MetricsLog(const MetricsOptions& options) : options_(options) {
  if (!options_.jsonl.empty()) {
    jsonl_.open(options_.jsonl, options_.append ? std::ios::app : std::ios::trunc);
    WEFT_CHECK(jsonl_.good(), "cannot write the --metrics file {}", options_.jsonl);
  }
  if (!options_.tensorboard.empty()) {
    events_ = std::make_unique<io::EventFileWriter>(
        io::EventFileWriter::in_directory(options_.tensorboard));
  }
}

void MetricsLog::write(const StepReport& r) {
  if (jsonl_.is_open()) {
    jsonl_ << metrics_line(r).dump() << "\n";
    jsonl_.flush();
    WEFT_CHECK(jsonl_.good(), "cannot write the --metrics file {}", options_.jsonl);
  }
  if (events_) {
    const int64_t step = r.result.step;
    events_->scalar("loss", step, r.result.loss);
    if (r.val_loss) events_->scalar("val_loss", step, *r.val_loss);
    events_->scalar("lr", step, r.result.lr);
    events_->scalar("grad_norm", step, r.result.grad_norm);
    events_->scalar("tokens_per_s", step, r.tokens_per_s);
    const bool log_step = options_.log_every > 0 && step % options_.log_every == 0;
    if (log_step || r.val_loss || step == r.total_steps) events_->flush();
  }
}

void MetricsLog::close() {
  if (jsonl_.is_open()) {
    jsonl_.close();
    WEFT_CHECK(!jsonl_.fail(), "cannot write the --metrics file {}", options_.jsonl);
  }
  if (events_) {
    events_->close();
    events_.reset();
  }
}

}  // namespace weft::train
