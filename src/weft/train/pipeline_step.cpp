#include "weft/train/pipeline_step.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <set>

#include "weft/kernels/activation.h"
#include "weft/kernels/step_scalars.h"
#include "weft/parallel/pipeline/stages.h"
#include "weft/train/run_loop.h"

namespace weft::train {

namespace pl = parallel::pipeline;

nn::GptStage pipeline_stage(const TrainConfig& cfg, int stage) {
  if (!pipelined(cfg)) return {};
  const pl::ScheduleKind kind = pl::parse_schedule_kind(cfg.pp_schedule);
  const std::vector<int64_t> bounds = pl::layer_boundaries(pl::split_layers(
      cfg.model.layers, cfg.pp, cfg.vpp, cfg.pp_layers, kind == pl::ScheduleKind::interleaved));
  const int S = cfg.pp * cfg.vpp;
  return {.first_layer = bounds[static_cast<size_t>(stage)],
          .end_layer = bounds[static_cast<size_t>(stage) + 1],
          .first = stage == 0,
          .last = stage == S - 1};
}

std::string describe_pipeline(const TrainConfig& cfg) {
  const pl::ScheduleKind kind = pl::parse_schedule_kind(cfg.pp_schedule);
  const bool interleaved = kind == pl::ScheduleKind::interleaved;
  const std::vector<int64_t> counts =
      pl::split_layers(cfg.model.layers, cfg.pp, cfg.vpp, cfg.pp_layers, interleaved);
  const int S = cfg.pp * cfg.vpp;
  const std::string how =
      !cfg.pp_layers.empty() ? "as --pp-layers gives"
      : interleaved          ? "equal chunks"
      : S > 1                ? format(
                                   "balanced, the embedding counted as a layer of stage 0 and the head and "
                                                  "loss as one of stage {} where the layers allow",
                                   S - 1)
              : "one stage";
  return format("pipeline {}: {} stages{}, {} micro-batches in flight; layers per stage {} ({})",
                cfg.pp_schedule, cfg.pp,
                cfg.vpp > 1 ? format(" x {} virtual", cfg.vpp) : std::string(), cfg.grad_accum,
                counts, how);
}

int64_t Trainer::num_parameters_global() {
  return pipeline_ ? pipeline_->parameters_global : model_->num_parameters_global();
}

namespace {

// The names of the parameters the other ranks of `pp` hold and none of
// `mine` has (collective over pp: two all-gathers).
std::vector<std::string> names_on_other_stages(comm::ProcessGroup& pp,
                                               const std::vector<nn::Parameter*>& mine) {
  std::string text;
  for (const nn::Parameter* p : mine) text += p->name + "\n";
  Tensor len = Tensor::empty({1}, DType::i64);
  len.data<int64_t>()[0] = static_cast<int64_t>(text.size());
  Tensor lens = Tensor::empty({pp.size()}, DType::i64);
  pp.all_gather(lens, len).wait();
  int64_t longest = 0;
  for (int r = 0; r < pp.size(); ++r) longest = std::max(longest, lens.data<int64_t>()[r]);
  Tensor bytes = Tensor::zeros({std::max<int64_t>(longest, 1)}, DType::u8);
  std::copy(text.begin(), text.end(), static_cast<char*>(bytes.raw()));
  Tensor all = Tensor::empty({bytes.numel() * pp.size()}, DType::u8);
  pp.all_gather(all, bytes).wait();
  std::set<std::string> own;
  for (const nn::Parameter* p : mine) own.insert(p->name);
  std::vector<std::string> out;
  for (int r = 0; r < pp.size(); ++r) {
    if (r == pp.rank()) continue;
    const char* at = static_cast<const char*>(all.raw()) + r * bytes.numel();
    const std::string theirs(at, static_cast<size_t>(lens.data<int64_t>()[r]));
    size_t from = 0;
    for (size_t nl = theirs.find('\n'); nl != std::string::npos; nl = theirs.find('\n', from)) {
      std::string name = theirs.substr(from, nl - from);
      if (!own.count(name)) out.push_back(std::move(name));
      from = nl + 1;
    }
  }
  return out;
}

}  // namespace

nn::Gpt& Trainer::chunk(int v) {
  return v == 0 ? *model_ : *pipeline_->more_chunks[static_cast<size_t>(v - 1)];
}

void Trainer::setup_pipeline(const parallel::ContextPtr& context) {
  auto p = std::make_shared<PipelineState>();
  const int P = cfg_.pp, V = cfg_.vpp, M = static_cast<int>(cfg_.grad_accum);
  const pl::ScheduleKind kind = pl::parse_schedule_kind(cfg_.pp_schedule);
  p->schedule = pl::make_schedule(kind, P, V, M);
  // The first micro-batch writes the weight gradients it computes instead of
  // adding to them (PassContext::first_microbatch): on every stage, its
  // weight-gradient work must come before any other micro-batch's.
  for (const auto& list : p->schedule.actions) {
    std::map<std::pair<pl::ActionKind, int>, bool> seen;
    for (const pl::Action& a : list) {
      if (a.kind != pl::ActionKind::backward && a.kind != pl::ActionKind::backward_input &&
          a.kind != pl::ActionKind::backward_weight) {
        continue;
      }
      const bool first = seen.emplace(std::pair{a.kind, a.stage}, true).second;
      WEFT_CHECK(!first || a.microbatch == 0,
                 "the {} schedule runs {} before micro-batch 0's on stage {}: the first "
                 "micro-batch's weight-gradient writes need it first",
                 cfg_.pp_schedule, pl::action_str(a), a.stage);
    }
  }
  // Evaluation runs the forwards of the same order, nothing else.
  p->forward_only = p->schedule;
  for (auto& list : p->forward_only.actions) {
    std::erase_if(list, [](const pl::Action& a) {
      return a.kind != pl::ActionKind::forward && a.kind != pl::ActionKind::send_activation &&
             a.kind != pl::ActionKind::recv_activation;
    });
  }
  const std::vector<std::vector<int>> pp_groups =
      grid_->layout().has("pp") ? grid_->groups("pp")
                                : std::vector<std::vector<int>>(1, std::vector<int>{0});
  if (grid_->layout().has("pp")) {
    p->pp = grid_->group_ptr("pp");
    p->links = pl::PipelineLinks::create(world_, pp_groups);
  }
  const int r = p->links.rank;
  for (int v = 1; v < V; ++v) {
    p->more_chunks.push_back(
        std::make_unique<nn::Gpt>(context, model_config(cfg_), pipeline_stage(cfg_, v * P + r)));
  }
  // The gradient norm counts a tied head's copy of wte once, as its original.
  for (int v = 0; v < V; ++v) {
    nn::Gpt& gpt = v == 0 ? *model_ : *p->more_chunks[static_cast<size_t>(v - 1)];
    for (nn::Parameter* prm : gpt.parameters()) {
      if (!gpt.holds_tied_copy() || prm != &gpt.embedding().wte()) p->norm_params.push_back(prm);
    }
  }
  if (p->pp) model_->set_parameters_on_other_stages(names_on_other_stages(*p->pp, params_));
  int64_t count = 0;
  for (const nn::Parameter* prm : p->norm_params) count += prm->spec.global_shape.numel();
  if (p->pp) {
    Tensor t = Tensor::empty({1}, DType::i64);
    t.data<int64_t>()[0] = count;
    p->pp->all_reduce(t).wait();
    count = t.data<int64_t>()[0];
  }
  p->parameters_global = count;
  if (cfg_.model.tied_head && P > 1) {
    std::vector<std::vector<int>> ends;
    for (const auto& g : pp_groups) ends.push_back({g.front(), g.back()});
    p->embedding = world_.new_subgroups_by_enumeration(ends, "pp-embedding");
  }
  pipeline_ = std::move(p);
}

void Trainer::measure_pipeline_draws(const io::Batch& b) {
  const int P = pipeline_->schedule.ranks, S = pipeline_->schedule.stages();
  const std::vector<std::string> streams{parallel::kDefaultStream, parallel::kModelParallelStream};
  // Each chunk's forward of one micro-batch on a copy of the streams: the
  // count depends on the shapes alone (zeros stand in for a received stream).
  Tensor counts = Tensor::zeros({S * 2}, DType::i64);
  for (int v = 0; v < cfg_.vpp; ++v) {
    nn::Gpt& gpt = chunk(v);
    const int stage = v * P + pipeline_->links.rank;
    parallel::RngTracker probe = rng_;
    nn::Ctx ctx(&probe, true);
    const Tensor in = gpt.stage().first ? b.inputs
                                        : model_->context()->exec.zeros(
                                              gpt.stream_shape(b.inputs.size(0), b.inputs.size(1)),
                                              gpt.stream_dtype(), MemoryTag::activations);
    gpt.stage_forward(ctx, in, b.targets);
    const auto before = rng_.state(), after = probe.state();
    for (size_t i = 0; i < streams.size(); ++i) {
      counts.data<int64_t>()[stage * 2 + static_cast<int64_t>(i)] =
          static_cast<int64_t>(after.at(streams[i]).offset - before.at(streams[i]).offset);
    }
  }
  if (pipeline_->pp) pipeline_->pp->all_reduce(counts).wait();
  pipeline_->draws.assign(static_cast<size_t>(S), {});
  for (int s = 0; s < S; ++s) {
    for (size_t i = 0; i < streams.size(); ++i) {
      pipeline_->draws[static_cast<size_t>(s)][streams[i]] =
          static_cast<uint64_t>(counts.data<int64_t>()[s * 2 + static_cast<int64_t>(i)]);
    }
  }
  pipeline_->draws_known = true;
}

void Trainer::pipeline_microbatches(Tensor& loss_sum, double& aux_sum, StepTimes& times) {
  using Clock = std::chrono::steady_clock;
  const ExecContext& ec = model_->context()->exec;
  const int P = pipeline_->schedule.ranks;
  const int M = pipeline_->schedule.microbatches;
  std::vector<io::Batch> batches;
  for (int m = 0; m < M; ++m) batches.push_back(sampler_->next_batch(step_, 0, part(m)));
  // Dropout: each micro-batch's masks as the unpipelined loop draws them.
  // (Not under the quantized recipes: the measuring forward would record
  // amaxes into their scaling state.)
  const bool keyed = cfg_.model.dropout > 0.0f && !cfg_.precision.quantized();
  if (keyed && !pipeline_->draws_known) measure_pipeline_draws(batches.front());
  const parallel::RngTracker::State base = rng_.state();
  const auto set_streams = [&](int m, int stage) {
    parallel::RngTracker::State st = base;
    for (auto& [name, stream] : st) {
      uint64_t per_microbatch = 0, before = 0;
      for (int s = 0; s < pipeline_->schedule.stages(); ++s) {
        const auto it = pipeline_->draws[static_cast<size_t>(s)].find(name);
        const uint64_t n = it == pipeline_->draws[static_cast<size_t>(s)].end() ? 0 : it->second;
        per_microbatch += n;
        if (s < stage) before += n;
      }
      stream.offset += static_cast<uint64_t>(m) * per_microbatch + before;
    }
    rng_.set_state(st);
  };
  // The last stage adds the losses; the others hold 0 (summed over the pipeline after).
  kernels::accumulate_scalar(ec, Tensor::from({1}, std::vector<float>{0.0f}), loss_sum, true);
  bool first_loss = true;
  std::map<std::pair<int, int>, std::unique_ptr<nn::Ctx>> ctxs;
  auto ready = [this](const std::vector<nn::Parameter*>& ps) {
    for (const nn::Parameter* p : ps) syncs_->mark_ready(p);
  };
  double forward_s = 0, backward_s = 0;
  pl::StageCallbacks cb;
  cb.forward = [&](int m, int stage, const Tensor& in) {
    const auto t0 = Clock::now();
    nn::Gpt& gpt = chunk(stage / P);
    auto& ctx = ctxs[{m, stage}];
    ctx = std::make_unique<nn::Ctx>(&rng_, true);
    ctx->set_reuse_weight_casts(true);
    ctx->set_final_microbatch(m == M - 1);
    // As the unpipelined loop: micro-batch 0's weight-gradient GEMMs write
    // the gradients (Parameter::grad_overwritten), the later ones add. Its
    // backward (or, zero-bubble, its deferred weight pass) runs first on
    // each stage: checked in setup_pipeline.
    ctx->set_first_microbatch(m == 0);
    if (keyed) set_streams(m, stage);
    const io::Batch& b = batches[static_cast<size_t>(m)];
    Tensor out = gpt.stage_forward(*ctx, gpt.stage().first ? b.inputs : in, b.targets);
    aux_sum += gpt.aux_loss(*ctx);
    if (gpt.stage().last) {
      kernels::accumulate_scalar(ec, out, loss_sum, first_loss);
      first_loss = false;
    }
    forward_s += std::chrono::duration<double>(Clock::now() - t0).count();
    return out;
  };
  cb.backward = [&](int m, int stage, const Tensor& dy) {
    const auto t0 = Clock::now();
    auto it = ctxs.find({m, stage});
    WEFT_CHECK(it != ctxs.end(),
               "pipeline stage {}: backward of micro-batch {} without its forward", stage, m);
    // A chunk's gradients are final in its backward of the last micro-batch.
    syncs_->set_sync(m == M - 1);
    Tensor dx =
        chunk(stage / P).stage_backward(*it->second, dy, 1.0f / static_cast<float>(M), ready);
    ctxs.erase(it);
    backward_s += std::chrono::duration<double>(Clock::now() - t0).count();
    return dx;
  };
  // Zero-bubble: the input gradient defers the Linear layers' weight
  // gradients into the pass's queue (PassContext::defer_weight_grads); the
  // weight pass runs them, and a chunk's gradients are final after its last
  // micro-batch's.
  cb.backward_input = [&](int m, int stage, const Tensor& dy) {
    const auto t0 = Clock::now();
    auto it = ctxs.find({m, stage});
    WEFT_CHECK(it != ctxs.end(),
               "pipeline stage {}: backward of micro-batch {} without its forward", stage, m);
    it->second->set_defer_weight_grads(true);
    Tensor dx = chunk(stage / P).stage_backward(*it->second, dy, 1.0f / static_cast<float>(M));
    backward_s += std::chrono::duration<double>(Clock::now() - t0).count();
    return dx;
  };
  cb.backward_weight = [&](int m, int stage) {
    const auto t0 = Clock::now();
    auto it = ctxs.find({m, stage});
    WEFT_CHECK(it != ctxs.end(),
               "pipeline stage {}: weight gradient of micro-batch {} without its "
               "input gradient",
               stage, m);
    it->second->run_deferred_weight_grads();
    ctxs.erase(it);
    if (m == M - 1) {
      syncs_->set_sync(true);
      ready(chunk(stage / P).parameters());
    }
    backward_s += std::chrono::duration<double>(Clock::now() - t0).count();
  };
  cb.buffer = stream_buffers(batches);
  times.pipeline = pl::run_schedule(pipeline_->schedule, pipeline_->links, cb).total_s;
  // The streams end where the unpipelined loop's do.
  if (keyed) set_streams(M, 0);
  times.forward += forward_s;
  times.backward += backward_s;
}

void Trainer::pipeline_finish_gradients() {
  if (!cfg_.model.tied_head || cfg_.pp * cfg_.vpp == 1) return;
  const ExecContext& ec = model_->context()->exec;
  if (pipeline_->embedding) {
    for (int v = 0; v < cfg_.vpp; ++v) {
      nn::Gpt& gpt = chunk(v);
      if (gpt.stage().first || gpt.holds_tied_copy()) {
        pipeline_->embedding->all_reduce(gpt.embedding().wte().grad).wait(ec);
      }
    }
    return;
  }
  // One rank holds the first and the last chunk (--pp 1 --vpp V): the sum is local.
  Tensor& first = chunk(0).embedding().wte().grad;
  Tensor& copy = chunk(cfg_.vpp - 1).embedding().wte().grad;
  kernels::axpy(ec, 1.0f, copy, first);
  copy.copy_from(first);
}

std::function<Tensor(int, int, bool)> Trainer::stream_buffers(
    const std::vector<io::Batch>& batches) {
  return [this, &batches](int m, int stage, bool) {
    nn::Gpt& gpt = chunk(stage / pipeline_->schedule.ranks);
    const io::Batch& b = batches[static_cast<size_t>(m)];
    return model_->context()->exec.empty(gpt.stream_shape(b.inputs.size(0), b.inputs.size(1)),
                                         gpt.stream_dtype(), MemoryTag::activations);
  };
}

double Trainer::pipeline_evaluate_sum(const std::vector<io::Batch>& batches) {
  const int P = pipeline_->schedule.ranks;
  double sum = 0;
  pl::StageCallbacks cb;
  cb.forward = [&](int m, int stage, const Tensor& in) {
    nn::Gpt& gpt = chunk(stage / P);
    nn::Ctx ctx(nullptr, false);
    const io::Batch& b = batches[static_cast<size_t>(m)];
    Tensor out = gpt.stage_forward(ctx, gpt.stage().first ? b.inputs : in, b.targets);
    if (gpt.stage().last) {
      const Tensor host = out.device().is_cpu() ? out : out.to(Device::cpu());
      sum += host.data<float>()[0];
    }
    return out;
  };
  cb.buffer = stream_buffers(batches);
  pl::run_schedule(pipeline_->forward_only, pipeline_->links, cb);
  if (!pipeline_->pp) return sum;
  // The last stage's sum, the same on every stage.
  Tensor d = Tensor::empty({1}, DType::f64);
  *d.data<double>() = sum;
  pipeline_->pp->all_reduce(d).wait();
  return *d.data<double>();
}

std::string Trainer::pipeline_locate_nonfinite() {
  const int P = pipeline_->schedule.ranks;
  const int M = pipeline_->schedule.microbatches;
  std::vector<io::Batch> batches;
  for (int m = 0; m < M; ++m) batches.push_back(sampler_->next_batch(step_, 0, part(m)));
  // The first (stage, where) of this rank's chunks, in stage order.
  int64_t bad_stage = -1;
  std::string bad_where;
  pl::StageCallbacks cb;
  cb.forward = [&](int m, int stage, const Tensor& in) {
    nn::Gpt& gpt = chunk(stage / P);
    nn::Ctx ctx(nullptr, false);
    const io::Batch& b = batches[static_cast<size_t>(m)];
    std::string where;
    Tensor out = gpt.stage_forward(ctx, gpt.stage().first ? b.inputs : in, b.targets, &where);
    if (!where.empty() && (bad_stage < 0 || stage < bad_stage)) {
      bad_stage = stage;
      bad_where = where;
    }
    return out;
  };
  cb.buffer = stream_buffers(batches);
  pl::run_schedule(pipeline_->forward_only, pipeline_->links, cb);
  // Every rank's finding (its stage and 64 bytes of text); the earliest stage's is where
  // it began, and every rank says the same.
  constexpr int64_t kText = 64;
  Tensor mine = Tensor::zeros({8 + kText}, DType::u8);
  char* raw = static_cast<char*>(mine.raw());
  std::memcpy(raw, &bad_stage, 8);
  std::memcpy(raw + 8, bad_where.data(), std::min<size_t>(bad_where.size(), kText - 1));
  Tensor all = Tensor::empty({(8 + kText) * world_.size()}, DType::u8);
  world_.all_gather(all, mine).wait();
  const char* rows = static_cast<const char*>(all.raw());
  int64_t first = -1;
  std::string where;
  for (int r = 0; r < world_.size(); ++r) {
    int64_t st = 0;
    std::memcpy(&st, rows + r * (8 + kText), 8);
    if (st >= 0 && (first < 0 || st < first)) {
      first = st;
      where = std::string(rows + r * (8 + kText) + 8);
    }
  }
  if (first < 0) {
    return " (pipeline: every stage's activations are finite: the gradients overflowed)";
  }
  return format(" (pipeline: first not finite on stage {}, in {})", first, where);
}

}  // namespace weft::train
