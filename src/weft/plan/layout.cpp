#include "weft/plan/layout.h"

#include <charconv>
#include <sstream>

#include "weft/core/error.h"

namespace weft::plan {

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  return "?";
}

Recompute parse_recompute(const std::string& s) {
  if (s == "none") return Recompute::none;
  if (s == "selective") return Recompute::selective;
  if (s == "full") return Recompute::full;
  WEFT_FAIL("unknown recompute mode '{}': use none, selective or full", s);
}

const char* pipeline_schedule_name(PipelineSchedule s) {
  switch (s) {
    case PipelineSchedule::gpipe: return "gpipe";
    case PipelineSchedule::one_f_one_b: return "1f1b";
    case PipelineSchedule::interleaved: return "interleaved";
    case PipelineSchedule::zero_bubble: return "zero-bubble";
  }
  return "?";
}

PipelineSchedule parse_pipeline_schedule(const std::string& s) {
  if (s == "gpipe") return PipelineSchedule::gpipe;
  if (s == "1f1b") return PipelineSchedule::one_f_one_b;
  if (s == "interleaved") return PipelineSchedule::interleaved;
  if (s == "zero-bubble") return PipelineSchedule::zero_bubble;
  WEFT_FAIL("unknown pipeline schedule '{}': use gpipe, 1f1b, interleaved or zero-bubble", s);
}

const char* dimension_name(Dimension d) {
  switch (d) {
    case Dimension::tp: return "tp";
    case Dimension::sp: return "sp";
    case Dimension::pp: return "pp";
    case Dimension::vpp: return "vpp";
    case Dimension::cp: return "cp";
    case Dimension::ep: return "ep";
    case Dimension::gtp: return "gtp";
    case Dimension::dp: return "dp";
    case Dimension::micro_batch: return "micro-batch";
    case Dimension::distributed_optimizer: return "distributed-optimizer";
    case Dimension::recompute: return "recompute";
  }
  return "?";
}

bool plannable(Dimension d) {
  for (const PlannableDimension& p : kPlannableDimensions)
    if (p.dimension == d) return p.enabled;
  return false;
}

std::vector<std::string> Layout::args() const {
  std::vector<std::string> a;
  auto add = [&](const char* name, int64_t v) {
    a.push_back(name);
    a.push_back(std::to_string(v));
  };
  // weft train's --tp defaults to 2: always said.
  add("--tp", tp);
  if (sp != parallel::SequenceParallel::off) {
    a.push_back("--sp");
    a.push_back(parallel::sequence_parallel_name(sp));
  }
  if (cp > 1) add("--cp", cp);
  if (ep > 1) add("--ep", ep);
  if (gtp > 1) add("--gtp", gtp);
  if (pp > 1) {
    add("--pp", pp);
    if (schedule != PipelineSchedule::one_f_one_b) {
      a.push_back("--pp-schedule");
      a.push_back(pipeline_schedule_name(schedule));
    }
    if (vpp > 1) add("--vpp", vpp);
  }
  if (dp > 1) add("--dp", dp);
  add("--micro-batch", micro_batch);
  if (grad_accum > 1) add("--grad-accum", grad_accum);
  if (distributed_optimizer) a.push_back("--distributed-optimizer");
  if (recompute != Recompute::none) {
    a.push_back("--recompute");
    a.push_back(recompute_name(recompute));
    if (recompute == Recompute::full && recompute_layers > 0)
      add("--recompute-layers", recompute_layers);
  }
  return a;
}

std::string Layout::text() const {
  std::string out;
  for (const std::string& s : args()) out += (out.empty() ? "" : " ") + s;
  return out;
}

namespace {

int64_t positive(const std::string& option, const std::string& value) {
  int64_t v = 0;
  // Sizes past 2^24 are no layout (and would overflow the products).
  const char* end = value.data() + value.size();
  const auto [p, ec] = std::from_chars(value.data(), end, v);
  WEFT_CHECK(ec == std::errc() && p == end && v >= 1 && v <= kMaxWorld,
             "{} takes a positive integer up to {}, got '{}'", option, kMaxWorld, value);
  return v;
}

}  // namespace

Layout parse_layout_args(const std::vector<std::string>& args) {
  Layout l;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string option = args[i];
    std::string value;
    if (const size_t eq = option.find('='); eq != std::string::npos) {
      value = option.substr(eq + 1);
      option = option.substr(0, eq);
    }
    if (option == "--distributed-optimizer") {
      l.distributed_optimizer = true;
      continue;
    }
    WEFT_CHECK(option.rfind("--", 0) == 0,
               "'{}' in a layout is not an option: write options such as --tp 8 --pp 16", args[i]);
    if (value.empty()) {
      WEFT_CHECK(i + 1 < args.size(), "{} in a layout needs a value", option);
      value = args[++i];
    }
    if (option == "--tp") {
      l.tp = static_cast<int>(positive(option, value));
    } else if (option == "--sp") {
      l.sp = parallel::parse_sequence_parallel(value);
    } else if (option == "--pp") {
      l.pp = static_cast<int>(positive(option, value));
    } else if (option == "--vpp") {
      l.vpp = static_cast<int>(positive(option, value));
    } else if (option == "--pp-schedule") {
      l.schedule = parse_pipeline_schedule(value);
    } else if (option == "--cp") {
      l.cp = static_cast<int>(positive(option, value));
    } else if (option == "--ep") {
      l.ep = static_cast<int>(positive(option, value));
    } else if (option == "--gtp") {
      l.gtp = static_cast<int>(positive(option, value));
    } else if (option == "--dp") {
      l.dp = static_cast<int>(positive(option, value));
    } else if (option == "--micro-batch") {
      l.micro_batch = positive(option, value);
    } else if (option == "--grad-accum") {
      l.grad_accum = positive(option, value);
    } else if (option == "--recompute") {
      l.recompute = parse_recompute(value);
    } else if (option == "--recompute-layers") {
      l.recompute_layers = positive(option, value);
    } else {
      WEFT_FAIL(
          "{} is not a layout option: a layout takes --tp, --sp, --pp, --vpp, --pp-schedule, "
          "--cp, --ep, --gtp, --dp, --micro-batch, --grad-accum, --distributed-optimizer, "
          "--recompute and --recompute-layers",
          option);
    }
  }
  const int64_t world = int64_t{l.tp} * l.cp * l.ep * l.gtp * l.pp * l.dp;
  WEFT_CHECK(world <= kMaxWorld && l.vpp <= kMaxWorld,
             "a layout of {} ranks is beyond what weft plans (at most {})", world, kMaxWorld);
  if (l.vpp > 1 && l.schedule == PipelineSchedule::one_f_one_b && l.pp > 1)
    l.schedule = PipelineSchedule::interleaved;
  return l;
}

Layout parse_layout_args(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return parse_layout_args(words);
}

}  // namespace weft::plan
