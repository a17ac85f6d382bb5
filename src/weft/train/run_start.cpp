#include "weft/train/run_start.h"

#include <filesystem>
#include <fstream>
#include <optional>

#include "weft/io/checkpoint.h"
#include "weft/io/checkpoint_dir.h"
#include "weft/parallel/gemm_quantizer.h"
#include "weft/train/pipeline_step.h"
#include "weft/train/run_loop.h"

namespace weft::train {

namespace {

// " x cp 2 x ep 2 x gtp 2": the grid's dimensions between tp and dp, when present.
std::string middle_dims(const comm::GridLayout& layout) {
  std::string out;
  for (const char* dim : {"cp", "ep", "gtp"}) {
    if (layout.has(dim)) out += format(" x {} {}", dim, layout.size(dim));
  }
  return out;
}

// "width 128 there, 64 here; seed ..." for what makes `saved` (a checkpoint's
// settings) another run than `run` on `data`; empty for the same run.
std::string run_differences(const io::Json& saved, const TrainConfig& run,
                            const io::Dataset& data) {
  std::string out;
  auto differ = [&](const std::string& what, const std::string& there, const std::string& here) {
    out += format("{}{} {} there, {} here", out.empty() ? "" : "; ", what, there, here);
  };
  const io::Json mine = run.to_json();
  for (const char* key : {"layers", "width", "heads", "seq", "vocab", "vocab-pad", "seed"}) {
    const io::Json* v = saved.find(key);
    if (!v && std::string(key) == "vocab-pad") v = saved.find("vocab_pad");
    if (!v || *v != mine.at(key)) differ(key, v ? v->dump() : "unknown", mine.at(key).dump());
  }
  const io::Json* fp = saved.find(kFingerprintKey);
  const std::string here = std::to_string(data.data().fingerprint());
  if (!fp || !fp->is_string() || fp->as_string() != here) {
    const io::Json* d = saved.find("data");
    std::string name = d && d->is_string() && !d->as_string().empty() ? d->as_string() : "fortunes";
    if (!fp) name = "unrecorded";
    const std::string source = run.data.empty() ? "fortunes" : run.data;
    differ("data", name == source ? name + " (other contents)" : name, source);
  }
  return out;
}

}  // namespace

std::vector<std::string> plan_start(TrainConfig& run, const io::Dataset& data) {
  std::vector<std::string> notes;
  if (!run.save.empty()) {
    io::prepare_save_dir(run.save);
    const bool resumes_it =
        !run.resume.empty() && io::in_run_dir(io::resolve_checkpoint(run.resume), run.save);
    // Continuing the run that --save holds: nothing in it is another run's to replace.
    if (resumes_it) run.overwrite = false;
    if (io::holds_checkpoint(run.save) && !resumes_it) {
      const std::string saved_dir = io::resolve_checkpoint(run.save);
      const int64_t saved_step = io::CheckpointReader(saved_dir).step();
      if (run.overwrite) {
        notes.push_back(
            format("--overwrite: the checkpoints in {} (step {}) go when this run "
                   "writes its first",
                   run.save, saved_step));
      } else {
        const std::string differs = run_differences(read_checkpoint_config(saved_dir), run, data);
        WEFT_CHECK(differs.empty() || !run.resume.empty(),
                   "--save {} holds a checkpoint of another run ({} at step {}: {}): pass "
                   "--resume {} to continue that run, --overwrite to replace it, or another "
                   "--save directory",
                   run.save, saved_dir, saved_step, differs, run.save);
        WEFT_CHECK(differs.empty(),
                   "--save {} holds a checkpoint of another run than the one --resume {} "
                   "continues ({} at step {}: {}): pass --overwrite to replace it, or another "
                   "--save directory",
                   run.save, run.resume, saved_dir, saved_step, differs);
        if (run.resume.empty()) {
          WEFT_CHECK(saved_step < run.steps,
                     "--save {} holds this run's checkpoint at step {}, which ends its --steps "
                     "{}: pass a larger --steps to train on, --overwrite to start afresh, or "
                     "another --save directory",
                     run.save, saved_step, run.steps);
          run.resume = run.save;
          notes.push_back(
              format("{} holds a checkpoint of this run at step {}: resuming from it "
                     "(--overwrite starts afresh)",
                     run.save, saved_step));
        }
      }
    }
  }
  if (run.resume.empty()) return notes;
  const io::Json saved = read_checkpoint_config(io::resolve_checkpoint(run.resume));
  const io::Json* schedule = saved.find("schedule-steps");
  const io::Json* steps = saved.find("steps");
  std::optional<int64_t> saved_total;
  if (schedule && schedule->is_integer()) {
    saved_total = schedule->as_int();
  } else if (steps && steps->is_integer()) {
    saved_total = steps->as_int();
  }
  if (run.reset_schedule) {
    run.schedule_steps.reset();
    notes.push_back(
        format("schedule: spans --steps {} (--reset-schedule; the saved run's spanned "
               "{})",
               run.steps, saved_total ? std::to_string(*saved_total) : "unknown"));
  } else if (!run.schedule_steps && saved_total && *saved_total != run.steps) {
    run.schedule_steps = *saved_total;
    notes.push_back(
        format("schedule: the saved run's, over {} steps (--reset-schedule spans "
               "--steps {} instead)",
               *saved_total, run.steps));
  }
  return notes;
}

int64_t truncate_metrics(const std::string& path, int64_t step) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) return 0;
  std::ifstream in(path, std::ios::binary);
  WEFT_CHECK(in.good(), "cannot read the --metrics file {}", path);
  std::string kept, line;
  int64_t dropped = 0;
  while (std::getline(in, line)) {
    bool keep = false;
    try {
      const io::Json j = io::parse_json(line, path);
      const io::Json* s = j.is_object() ? j.find("step") : nullptr;
      keep = s && s->is_integer() && s->as_int() <= step;
    } catch (const Error&) {
    }
    if (keep) {
      kept += line + "\n";
    } else {
      ++dropped;
    }
  }
  in.close();
  if (dropped == 0) return 0;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << kept;
    out.flush();
    WEFT_CHECK(out.good(), "cannot write {}", tmp);
  }
  fs::rename(tmp, path, ec);
  WEFT_CHECK(!ec, "cannot replace the --metrics file {}: {}", path, ec.message());
  return dropped;
}

namespace {

// ", distributed optimizer, recompute full (the first 2 of 4 layers)": the
// memory options in use.
std::string memory_levers(const TrainConfig& c) {
  std::string out = c.distributed_optimizer ? ", distributed optimizer" : "";
  if (c.model.recompute != nn::Recompute::none) {
    out += format(", recompute {}", nn::recompute_name(c.model.recompute));
    if (c.model.recompute_layers > 0) {
      out += format(" (the first {} of {} layers)", c.model.recompute_layers, c.model.layers);
    }
  }
  return out;
}

}  // namespace

std::string describe_run(Trainer& t, const io::Dataset& data) {
  const TrainConfig& c = t.config();
  const comm::Grid& g = t.grid();
  const double params = static_cast<double>(t.num_parameters_global()) / 1e6;
  const nn::GptConfig p = nn::gpt_preset(c.preset);
  const bool is_preset = p.layers == c.model.layers && p.width == c.model.width &&
                         p.heads == c.model.heads && p.seq == c.model.seq &&
                         p.vocab == c.model.vocab;
  return format(
      "model {}: {} layers, width {}, {} heads, context {}, vocab {} ({:.2f}M parameters), {}\n"
      "data  {}: {} tokens ({} train, {} validation)\n"
      "ranks {} on the {} backend: tp {}{} x dp {}{}, sp {}{}\n{}"
      "steps {}: {} sequences x {} tokens per step (micro-batch {} x dp {} x accum {}), lr {:g} "
      "(warmup {}, cosine {}to {:g})",
      is_preset ? c.preset : "(custom)", c.model.layers, c.model.width, c.model.heads, c.model.seq,
      c.model.vocab, params,
      c.precision.quantized()
          ? std::string(parallel::recipe_name(c.precision.recipe)) + " (" +
                std::string(dtype_name(c.precision.activation())) + " activations; GEMMs " +
                parallel::quantized_gemm_path(t.model().context()->exec.device(),
                                              c.precision.recipe,
                                              t.model().context()->quantized_gemm)
                    .text +
                ")"
          : std::string(dtype_name(c.compute_dtype())),
      data.data().source, data.data().size(), data.train().size(), data.val().size(),
      t.world().size(), t.world().backend(), g.size("tp"), middle_dims(g.layout()), g.size("dp"),
      g.layout().has("pp") ? format(" x pp {}", g.size("pp")) : std::string(),
      nn::sequence_parallel_name(c.sp), memory_levers(c),
      pipelined(c) ? describe_pipeline(c) + "\n" : std::string(), c.steps,
      c.sequences_per_step(t.dp_size()), c.model.seq, c.micro_batch, t.dp_size(), c.grad_accum,
      c.lr_value(), c.warmup_steps(),
      c.schedule_total() == c.steps ? std::string() : format("over {} steps ", c.schedule_total()),
      c.min_lr_value());
}

std::vector<std::string> resume_notes(const TrainConfig& run, const io::Dataset& data,
                                      int64_t first_step, int dp) {
  std::vector<std::string> notes;
  notes.push_back(format("resumed from {} at step {}", run.resume, first_step));
  const io::Json saved_config = read_checkpoint_config(io::resolve_checkpoint(run.resume));
  const io::Json* saved = saved_config.find(kFingerprintKey);
  if (saved && saved->is_string() &&
      saved->as_string() != std::to_string(data.data().fingerprint())) {
    notes.push_back(
        format("note: {} is not the data {} was trained on; the batches differ from those "
               "the saved run would have seen",
               data.data().source, run.resume));
  }
  const io::Json* batch = saved_config.find(kBatchKey);
  const int64_t now = run.sequences_per_step(dp);
  if (batch && batch->is_integer() && batch->as_int() != now) {
    notes.push_back(
        format("note: {} trained on {} sequences per step, this run on {} (micro-batch {} x "
               "dp {} x accum {}): set --micro-batch or --grad-accum to keep the batch",
               run.resume, batch->as_int(), now, run.micro_batch, dp, run.grad_accum));
  }
  return notes;
}

}  // namespace weft::train
