#include "weft/train/trainer.h"

#include <atomic>

#include "weft/comm/world.h"
#include "weft/io/tokenizer.h"
#include "weft/text/tokenizer.h"
#include "weft/train/launch.h"
#include "weft/train/metrics.h"
#include "weft/train/run_start.h"
#include "weft/train/run_tokenizer.h"
#include "weft/train/stop_signal.h"

namespace weft::train {

io::Dataset load_dataset(const TrainConfig& cfg) {
  io::TokenData data = cfg.data.empty() ? io::default_corpus() : io::load_token_files(cfg.data);
  std::optional<io::TokenData> val;
  if (!cfg.val_data.empty()) val = io::load_token_files(cfg.val_data);
  for (const io::TokenData* d : {&data, val ? &*val : nullptr}) {
    if (!d) continue;
    WEFT_CHECK(d->vocab_needed() <= cfg.model.vocab,
               "{} holds token id {}, but the model's vocabulary is {}: pass --vocab {} (GPT-2 "
               "tokens: --preset gpt2-124m)",
               d->source, d->vocab_needed() - 1, cfg.model.vocab, d->vocab_needed());
  }
  if (val) return io::Dataset(std::move(data), std::move(*val), cfg.model.seq);
  return io::Dataset(std::move(data), cfg.model.seq, cfg.val_fraction);
}

namespace {

// The prompt of the end-of-run sample: text through the run's tokenizer when
// it has one, through the byte tokenizer for byte vocabularies, else GPT-2's
// <|endoftext|> (or id 0).
std::vector<int32_t> sample_prompt(const TrainConfig& c, const text::Tokenizer* tok) {
  if (tok) return encode_prompt(*tok, c.sample_prompt);
  if (c.model.vocab == io::ByteTokenizer::kVocabSize) {
    return io::ByteTokenizer().encode(c.sample_prompt.empty() ? "\n" : c.sample_prompt);
  }
  return {c.model.vocab == 50257 ? 50256 : 0};
}

}  // namespace

TrainSummary run_training(const TrainConfig& cfg, const TrainCallbacks& cb) {
  validate(cfg);
  const Launch launch = plan_launch(cfg);
  io::Dataset data = load_dataset(cfg);
  TrainConfig run = cfg;
  std::string tokenizer_from;
  run.tokenizer_json = find_run_tokenizer(cfg, tokenizer_from);
  std::optional<text::Tokenizer> tokenizer;
  if (!run.tokenizer_json.empty()) {
    tokenizer.emplace(text::Tokenizer::from_json(run.tokenizer_json, tokenizer_from));
    WEFT_CHECK(
        tokenizer->vocab_size() <= run.model.vocab,
        "the tokenizer {} has {} tokens, but the model's vocabulary is {}: pass --vocab {} (or "
        "leave --vocab out to take the tokenizer's)",
        tokenizer_from, tokenizer->vocab_size(), run.model.vocab, tokenizer->vocab_size());
  }
  apply_global_batch(run, launch.dp);
  const std::vector<std::string> plan = plan_start(run, data);
  validate(run);
  TrainSummary summary;
  std::atomic<int> stopped_by{0};
  const StopSignals signals;
  comm::run_world(
      launch.local_ranks,
      [&](comm::ProcessGroup& world) {
        Trainer trainer(run, world, data);
        const bool lead = world.rank() == 0;
        auto note = [&](const std::string& s) {
          if (lead && cb.on_note) cb.on_note(s);
        };
        if (lead && !run.metrics.empty() && !run.resume.empty()) {
          const int64_t dropped = truncate_metrics(run.metrics, trainer.steps_done());
          if (dropped > 0) {
            note(format("{}: dropped {} lines past step {}", run.metrics, dropped,
                        trainer.steps_done()));
          }
        }
        MetricsLog metrics = lead ? MetricsLog({.jsonl = run.metrics,
                                                .append = !run.resume.empty(),
                                                .tensorboard = run.tensorboard,
                                                .log_every = run.log_every})
                                  : MetricsLog();
        if (lead && cb.on_start) cb.on_start(describe_run(trainer, data));
        for (const std::string& line : plan) note(line);
        TrainSummary s;
        s.first_step = trainer.steps_done();
        if (!run.resume.empty()) {
          for (const std::string& line : resume_notes(run, data, s.first_step, trainer.dp_size())) {
            note(line);
          }
        }
        WEFT_CHECK(run.stop_at == 0 || run.stop_at > s.first_step,
                   "--stop-at {} is not after the checkpoint's step {}: pass a later step",
                   run.stop_at, s.first_step);
        s.first_val_loss = trainer.evaluate();
        note(format("step {}: val loss {:.4f}", s.first_step, *s.first_val_loss));
        const StepsDone done = run_steps(
            trainer, s.first_step, metrics,
            [&](const StepReport& rep) {
              if (lead && cb.on_step) cb.on_step(rep);
            },
            note);
        s.final_loss = done.final_loss;
        s.final_val_loss = done.final_val_loss;
        // MoE: the routers' load balance in the latest forward (the final
        // evaluation's), over every data rank; the busiest expert against an even share.
        const std::vector<std::vector<int64_t>> load = trainer.expert_load();
        for (size_t i = 0; i < load.size(); ++i) {
          std::string counts;
          int64_t total = 0, most = 0;
          for (int64_t c : load[i]) {
            counts += (counts.empty() ? "" : " ") + std::to_string(c);
            total += c;
            most = std::max(most, c);
          }
          const double even = static_cast<double>(total) / static_cast<double>(load[i].size());
          note(format("MoE layer {}: tokens per expert {} (busiest {:.2f}x an even share)", i,
                      counts, even > 0 ? static_cast<double>(most) / even : 0.0));
        }
        s.stop_signal = done.stop_signal;
        if (done.stop_signal) stopped_by.store(done.stop_signal);
        s.steps = trainer.steps_done();
        s.seconds = done.seconds;
        s.tokens_per_s = done.tokens_per_s;
        if (run.sample_tokens > 0 && !s.stop_signal && trainer.pipelined()) {
          note(
              "no end-of-run sample under --pp: generation runs on an unsplit model (evaluate "
              "or export the checkpoint and run weft generate)");
        } else if (run.sample_tokens > 0 && !s.stop_signal && run.cp > 1) {
          note(
              format("no sample at the end: generation runs without context parallelism (--cp "
                     "{}); save a checkpoint and use weft generate",
                     run.cp));
        } else if (run.sample_tokens > 0 && !s.stop_signal) {
          const text::Tokenizer* tok = tokenizer ? &*tokenizer : nullptr;
          s.sample_ids = trainer.sample(sample_prompt(run, tok), run.sample_tokens, run.seed);
          s.sample_is_text = tok || run.model.vocab == io::ByteTokenizer::kVocabSize;
          if (tok)
            s.sample = decode_generated(*tok, s.sample_ids);
          else if (run.model.vocab == io::ByteTokenizer::kVocabSize)
            s.sample = io::ByteTokenizer().decode(s.sample_ids);
        }
        if (lead) {
          s.reporter = true;
          summary = std::move(s);
        }
      },
      launch.backend);
  summary.stop_signal = stopped_by.load();
  return summary;
}

}  // namespace weft::train
