// `weft train`: train a GPT with tensor and data parallelism.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli.h"
#include "weft/infer/generate.h"
#include "plan_options.h"
#include "weft/comm/world.h"
#include "weft/io/checkpoint.h"
#include "weft/io/data.h"
#include "weft/text/tokenizer.h"
#include "weft/train/run_tokenizer.h"
#include "weft/train/stop_signal.h"
#include "weft/train/trainer.h"

namespace weft {
namespace {

std::string clock_time(double seconds) {
  const auto s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  }
  return buf;
}

std::string num(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string rate(double tokens_per_s) {
  return tokens_per_s >= 1e4 ? num("%.1fk", tokens_per_s / 1e3) : num("%.0f", tokens_per_s);
}

io::Json read_json_file(const std::string& path) {
  WEFT_CHECK(!std::filesystem::is_directory(path),
             "the --config file {} is a directory: pass a JSON file of settings", path);
  std::ifstream in(path, std::ios::binary);
  WEFT_CHECK(in.good(), "cannot open the --config file {}: pass an existing JSON file", path);
  std::stringstream text;
  text << in.rdbuf();
  return io::parse_json(text.str(), path);
}

struct Resolved {
  train::TrainConfig cfg{};
  // "micro-batch 4, save ck": the settings taken from the resumed checkpoint
  // that differ from the defaults (empty when none).
  std::string from_checkpoint{};
};

// Settings, lowest precedence first: defaults, the checkpoint being resumed,
// --config, the command line. Relative paths in --config resolve against its
// directory, those in a checkpoint against the checkpoint's.
Resolved resolve(const cli::Options& opts) {
  Resolved out;
  train::TrainConfig& cfg = out.cfg;
  io::Json file;
  if (opts.given("config")) {
    const std::string path = opts.str("config");
    file = train::resolve_paths(read_json_file(path),
                                std::filesystem::path(path).parent_path().string());
  }
  std::string resume;
  if (const io::Json* r = file.is_object() ? file.find("resume") : nullptr) {
    if (r->is_string()) resume = r->as_string();
  }
  if (opts.given("resume")) resume = opts.str("resume");
  io::Json saved;
  if (!resume.empty()) {
    saved = train::resumable_settings(train::read_checkpoint_config(resume));
    train::apply_settings(cfg, saved, "checkpoint " + resume);
  }
  std::string init;
  if (const io::Json* i = file.is_object() ? file.find("init") : nullptr) {
    if (i->is_string()) init = i->as_string();
  }
  if (opts.given("init")) init = opts.str("init");
  if (!init.empty()) {
    train::apply_settings(cfg, train::shape_settings(train::read_checkpoint_config(init)), init);
  }
  if (opts.given("config")) train::apply_settings(cfg, file, opts.str("config"));
  io::Json flags = io::Json::object();
  for (const train::ConfigKey& k : train::train_config_keys()) {
    if (opts.given(k.name)) flags[k.name] = opts.str(k.name);
  }
  train::apply_settings(cfg, flags, "");
  // llm.c shards carry another tokenizer's ids: unless a layer chose the
  // vocabulary (--vocab, --preset, a checkpoint or --init shape), take that
  // tokenizer's.
  auto in_file = [&](const char* key) { return file.is_object() && file.find(key); };
  const bool vocab_chosen = opts.given("vocab") || opts.given("preset") || in_file("vocab") ||
                            in_file("preset") || !resume.empty() || !init.empty();
  if (!vocab_chosen && !cfg.data.empty()) {
    const auto format = io::data_format(cfg.data);
    if (format != io::TokenData::Format::text) cfg.model.vocab = io::tokenizer_vocab(format);
  }
  // A Hugging Face tokenizer (--tokenizer, or the one beside the shards)
  // gives its vocabulary, a preset's too, unless --vocab (or the checkpoint
  // resumed or started from) says otherwise.
  if (!opts.given("vocab") && !in_file("vocab") && resume.empty() && init.empty()) {
    std::string where;
    const std::string json = train::find_run_tokenizer(cfg, where);
    if (!json.empty()) cfg.model.vocab = text::Tokenizer::from_json(json, where).vocab_size();
  }
  cfg.overwrite = opts.flag_set("overwrite");
  cfg.reset_schedule = opts.flag_set("reset-schedule");
  if (saved.is_object()) {
    const io::Json defaults = train::TrainConfig().to_json();
    for (const auto& [key, value] : saved.as_object()) {
      bool overridden = opts.given(key);
      if (file.is_object()) {
        for (const auto& [name, v] : file.as_object())
          overridden |= train::canonical_key(name) == key;
      }
      if (overridden || defaults.at(key) == value) continue;
      const std::string text = value.is_string()    ? value.as_string()
                               : value.is_integer() ? value.dump()
                               : value.is_number()  ? num("%.6g", value.as_double())
                                                    : value.dump();
      out.from_checkpoint += (out.from_checkpoint.empty() ? "" : ", ") + key + " " + text;
    }
  }
  return out;
}

void progress(std::ostream& out, const train::StepReport& r, int64_t log_every) {
  const int64_t step = r.result.step;
  const bool show = r.val_loss || step == r.total_steps || (log_every > 0 && step % log_every == 0);
  if (!show) return;
  const int64_t width = static_cast<int64_t>(std::to_string(r.total_steps).size());
  const double per_step = r.elapsed_s / static_cast<double>(std::max<int64_t>(r.steps_this_run, 1));
  std::ostringstream line;
  line << "step " << std::string(static_cast<size_t>(width) - std::to_string(step).size(), ' ')
       << step << "/" << r.total_steps << "  loss " << num("%.4f", r.result.loss);
  if (r.val_loss) line << "  val " << num("%.4f", *r.val_loss);
  if (r.result.aux_loss != 0) line << "  aux " << num("%.4f", r.result.aux_loss);
  line << "  lr " << num("%.2e", r.result.lr) << "  |g| " << num("%.3f", r.result.grad_norm) << "  "
       << rate(r.tokens_per_s) << " tok/s  " << clock_time(r.elapsed_s) << " ETA "
       << clock_time(per_step * static_cast<double>(r.total_steps - step));
  out << line.str() << std::endl;
}

// --layout auto: the plan's pick for the world and global batch the other
// options give, applied over them.
void choose_layout(const cli::Options& opts, train::TrainConfig& cfg, std::ostream& log) {
  const int data = cfg.ep * cfg.gtp * std::max(cfg.dp, 1);
  const int launched = comm::launcher_world_size();
  const int world = launched > 0 ? launched : cfg.tp * data;
  const int64_t global_batch = cfg.global_batch.value_or(
      cfg.micro_batch * (launched > 0 ? launched / cfg.tp : data) * cfg.grad_accum);
  const int64_t limit = opts.given("memory-limit")
                            ? plan::parse_memory_size(opts.str("memory-limit"), "--memory-limit")
                            : 0;
  const plan::PlannedLayout pick =
      pick_layout(cfg, world, global_batch, limit, opts.str("memory-limit"));
  io::Json s = io::Json::object();
  const std::vector<std::string> args = pick.layout.args();
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string key = args[i].substr(2);
    if (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) {
      s[key] = args[++i];
    } else {
      s[key] = true;
    }
  }
  // The layout's sizes replace the given ones (dp, ep, gtp and sp back to
  // their defaults first, so that a size the pick leaves out is 1).
  cfg.sp = nn::SequenceParallel::off;
  cfg.ep = cfg.gtp = 1;
  cfg.dp = launched > 0 ? 0 : 1;
  cfg.grad_accum = 1;
  train::apply_settings(cfg, s, "");
  cfg.global_batch = global_batch;
  log << "layout auto: " << pick.layout.text() << " (of the layouts of " << world
      << " ranks at global batch " << global_batch
      << (limit > 0 ? " within " + opts.str("memory-limit") : std::string()) << ": predicted "
      << plan::format_bytes(pick.memory.total()) << " per rank, "
      << num("%.0f", pick.cost.tokens_per_s) << " tokens/s)" << std::endl;
}

cli::Options train_command_options() {
  cli::Options opts(
      "weft train [options]",
      "Trains a GPT with tensor parallelism (--tp) and data parallelism (--dp) and prints a\n"
      "generated sample at the end. With no options: the tiny model on Debian's fortunes\n"
      "corpus, 2 TP ranks as threads of this process, a few minutes on two cores.\n"
      "Multi-process: `mpirun -np N weft train --tp T` (the mpi backend; dp = N / T; with\n"
      "--device cuda one GPU per process over nccl).\n"
      "--config FILE reads a JSON object whose keys are these option names; options on the\n"
      "command line override it. --resume DIR continues a checkpoint with its settings\n"
      "(--save, --save-every and --metrics included; any TP/DP layout; bitwise-identical\n"
      "when the layout is the same). --save DIR keeps step-NNNNNN checkpoints and a `latest`\n"
      "pointer; running the same command again resumes from it. Ctrl-C or SIGTERM stops\n"
      "after the current step with a checkpoint (exit status 130 / 143); a second Ctrl-C\n"
      "stops at once.");
  for (const train::ConfigKey& k : train::train_config_keys()) {
    opts.option(k.name, k.metavar, k.fallback, k.help);
  }
  opts.option("config", "FILE", "none", "JSON file of settings (keys as the options above)")
      .option(
          "layout", "given|auto", "given",
          "auto: train on the layout `weft plan` ranks first for this model, world (mpirun's, "
          "else --tp x --ep x --gtp x --dp as given) and global batch (--global-batch, else "
          "--micro-batch x data ranks x --grad-accum) within --memory-limit; says which it took")
      .option("memory-limit", "SIZE", "none",
              "--layout auto: bytes per rank a layout may need (40GiB, 512MiB)")
      .flag("overwrite",
            "start afresh even when --save holds a checkpoint (of this or another run); its "
            "checkpoints go when this run writes its first")
      .flag("reset-schedule",
            "resuming with another --steps: spread the learning-rate schedule over the new "
            "--steps (default: keep the saved run's)")
      .flag("json", "print the summary as one JSON object (progress goes to stderr)");
  return opts;
}

int train_command(const std::vector<std::string>& args) {
  cli::Options opts = train_command_options();
  opts.parse(args);
  const bool json = opts.flag_set("json");
  Resolved resolved = resolve(opts);
  std::ostream& log = json ? std::cerr : std::cout;
  if (opts.choice("layout", {"given", "auto"}) == "auto") {
    choose_layout(opts, resolved.cfg, log);
  } else {
    WEFT_CHECK(!opts.given("memory-limit"),
               "--memory-limit bounds the layouts --layout auto chooses from: add --layout auto");
  }
  const train::TrainConfig& cfg = resolved.cfg;

  train::TrainCallbacks cb;
  cb.on_start = [&](const std::string& text) {
    log << text << std::endl;
    if (!resolved.from_checkpoint.empty()) {
      log << "from checkpoint " << cfg.resume << ": " << resolved.from_checkpoint << std::endl;
    }
  };
  cb.on_note = [&](const std::string& text) { log << text << std::endl; };
  cb.on_step = [&](const train::StepReport& r) { progress(log, r, cfg.log_every); };
  const train::TrainSummary s = train::run_training(cfg, cb);
  // 128 + the signal, as a shell reports a process the signal ended.
  const int status = s.stop_signal ? 128 + s.stop_signal : 0;
  if (!s.reporter) return status;  // another rank of an mpirun job reports

  if (json) {
    io::Json out = io::Json::object();
    out["steps"] = s.steps;
    out["loss"] = s.final_loss;
    out["val_loss_first"] = s.first_val_loss ? io::Json(*s.first_val_loss) : io::Json();
    out["val_loss"] = s.final_val_loss ? io::Json(*s.final_val_loss) : io::Json();
    out["seconds"] = s.seconds;
    out["tokens_per_s"] = s.tokens_per_s;
    if (s.sample_is_text) out["sample"] = infer::valid_utf8(s.sample);
    io::Json ids = io::Json::array();
    for (int32_t id : s.sample_ids) ids.push_back(id);
    out["sample_ids"] = std::move(ids);
    out["stopped_by"] = s.stop_signal ? io::Json(train::signal_name(s.stop_signal)) : io::Json();
    std::cout << out.dump() << std::endl;
    return status;
  }
  if (s.stop_signal) return status;
  std::cout << "done: " << (s.steps - s.first_step) << " steps in " << clock_time(s.seconds) << " ("
            << rate(s.tokens_per_s) << " tokens/s)";
  if (s.first_val_loss && s.final_val_loss) {
    std::cout << "; val loss " << num("%.4f", *s.first_val_loss) << " -> "
              << num("%.4f", *s.final_val_loss);
  }
  std::cout << "\n";
  if (!s.sample_ids.empty()) {
    if (s.sample_is_text) {
      std::cout << "sample:\n" << s.sample << "\n";
    } else {
      std::cout << "sample (token ids; pass --tokenizer FILE|DIR to turn them into text):\n";
      for (size_t i = 0; i < s.sample_ids.size(); ++i)
        std::cout << (i ? " " : "") << s.sample_ids[i];
      std::cout << "\n";
    }
  }
  return 0;
}

const cli::Register reg("train", "train a GPT (tensor + data parallel); prints a sample",
                        train_command_options, train_command);

}  // namespace
}  // namespace weft
