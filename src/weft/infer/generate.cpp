#include "weft/infer/generate.h"

#include <algorithm>
#include <optional>
#include <span>

#include "weft/core/threads.h"
#include "weft/infer/kv_cache.h"
#include "weft/parallel/mappings.h"

namespace weft::infer {

namespace {

// rows (B, Vp/tp) of this rank's vocabulary slice -> (B, Vp) f32 on the host,
// every slice gathered over the TP group.
std::vector<float> gathered(const parallel::ParallelContext& pc, const Tensor& rows) {
  const Tensor full = parallel::forward(pc.exec, parallel::Mapping::gather_from_tp, pc.tp.get(),
                                        rows.to(DType::f32));
  return full.to(Device::cpu()).to_vector();
}

// Logits over the real vocabulary at the last position of `window`,
// recomputing the whole window (no cache).
std::vector<float> recomputed_logits(nn::Gpt& model, std::span<const int32_t> window) {
  const nn::GptConfig& cfg = model.config();
  const parallel::ParallelContext& pc = *model.context();
  const int tp = pc.tp_size();
  const int64_t len = static_cast<int64_t>(window.size());
  // Sequence parallelism splits the sequence evenly: pad on the right, which
  // causal attention never lets the earlier positions see.
  int64_t padded = len;
  if (pc.sp == nn::SequenceParallel::seq) padded = (len + tp - 1) / tp * tp;
  std::vector<int32_t> ids(static_cast<size_t>(padded), 0);
  std::copy(window.begin(), window.end(), ids.begin());
  nn::Ctx ctx(nullptr, false);
  ctx.set_reuse_weight_casts(true);
  // (G, padded, Vp/tp): G is the group's batch, tp copies of the prompt under --sp batch.
  const Tensor logits = model.forward(ctx, Tensor::from_i32({1, padded}, ids));
  std::vector<float> v = gathered(pc, logits.rows(len - 1, 1));
  v.resize(static_cast<size_t>(cfg.vocab));
  return v;
}

// The recomputing path: each prompt alone, the model run over the last
// `seq` tokens for every new token.
std::vector<int32_t> generate_recomputing(nn::Gpt& model, const std::vector<int32_t>& prompt,
                                          const GenerateOptions& o, uint64_t seed) {
  const int64_t seq = model.config().seq;
  Sampler sampler(o.sampling(), seed);
  std::vector<int32_t> context = prompt, out;
  for (int64_t i = 0; i < o.tokens; ++i) {
    const size_t len = std::min(context.size(), static_cast<size_t>(seq));
    const int32_t next = sampler.next(
        recomputed_logits(model, std::span(context.data() + context.size() - len, len)));
    context.push_back(next);
    out.push_back(next);
    if (next == o.eos) break;
  }
  return out;
}

// A step's largest GEMM in multiply-adds: rows of the widest weight this
// rank holds (the MLP's, or the LM head's slice of the vocabulary).
double largest_gemm(const nn::GptConfig& cfg, int tp, int64_t rows) {
  const auto c = static_cast<double>(cfg.width);
  const double widest =
      std::max(static_cast<double>(cfg.mlp_hidden()),
               static_cast<double>(nn::padded_vocab_size(cfg.vocab, cfg.vocab_pad)));
  return static_cast<double>(rows) * c * widest / tp;
}

// Below this many multiply-adds in its largest GEMM a step runs on the
// calling thread: its few dozen kernels are each shorter than waking a
// thread team for them (tiny's decode step: 65 thousand; GPT-2 small's: 39
// million, in the LM head).
constexpr double kSerialStep = 1 << 20;

// The cached path: one prefill of every prompt, then a step of one position
// per sequence.
std::vector<std::vector<int32_t>> generate_cached(nn::Gpt& model,
                                                  const std::vector<std::vector<int32_t>>& prompts,
                                                  const GenerateOptions& o) {
  const nn::GptConfig& cfg = model.config();
  const parallel::ParallelContext& pc = *model.context();
  const int64_t batch = static_cast<int64_t>(prompts.size()), seq = cfg.seq;
  const auto entries = static_cast<size_t>(batch);
  const int64_t padded_vocab = nn::padded_vocab_size(cfg.vocab, cfg.vocab_pad);
  KvCache cache(model, batch);
  std::vector<Sampler> samplers;
  for (size_t b = 0; b < entries; ++b) samplers.emplace_back(o.sampling(), o.seed + b);
  std::vector<std::vector<int32_t>> context = prompts, out(entries);
  std::vector<bool> done(entries, o.tokens == 0);
  const bool serial_steps = largest_gemm(cfg, pc.tp_size(), batch) < kSerialStep;
  auto forward = [&](const std::vector<int32_t>& ids, int64_t width,
                     const std::vector<int64_t>& rows) {
    std::optional<ScopedNumThreads> one;
    if (width == 1 && serial_steps) one.emplace(1);
    nn::Ctx ctx(nullptr, false);
    ctx.set_reuse_weight_casts(true);
    const Tensor logits =
        model.forward_cached(ctx, Tensor::from_i32({batch, width}, ids), cache.views(), rows);
    return gathered(pc, logits);
  };
  // The prefill: the prompts right-padded with id 0, each read at its last position.
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  std::vector<int32_t> ids(entries * longest, 0);
  std::vector<int64_t> rows(entries);
  for (size_t b = 0; b < entries; ++b) {
    std::copy(prompts[b].begin(), prompts[b].end(),
              ids.begin() + static_cast<int64_t>(b * longest));
    rows[b] = static_cast<int64_t>(prompts[b].size()) - 1;
  }
  std::vector<float> logits = forward(ids, static_cast<int64_t>(longest), rows);
  for (size_t b = 0; b < entries; ++b) cache.set_length(static_cast<int64_t>(b), rows[b] + 1);
  // Entries past the context recompute: their logits, row b's otherwise.
  std::vector<std::vector<float>> own(entries);
  std::vector<int32_t> step(entries);
  std::fill(rows.begin(), rows.end(), 0);
  for (;;) {
    for (size_t b = 0; b < entries; ++b) {
      if (done[b]) continue;
      const std::span<const float> row =
          own[b].empty() ? std::span<const float>(logits).subspan(b * padded_vocab, cfg.vocab)
                         : std::span<const float>(own[b]);
      const int32_t next = samplers[b].next(row);
      context[b].push_back(next);
      out[b].push_back(next);
      done[b] = next == o.eos || static_cast<int64_t>(out[b].size()) == o.tokens;
    }
    if (std::all_of(done.begin(), done.end(), [](bool d) { return d; })) break;
    // Entry b's newest token goes in at position length(b) while it fits the
    // context; the others idle at a scratch position (their cache is no
    // longer read) and are fed token 0.
    bool cached = false;
    for (size_t b = 0; b < entries; ++b) {
      const auto n = static_cast<int64_t>(context[b].size());
      const bool fits = !done[b] && n <= seq;
      own[b].clear();
      if (!done[b] && !fits) {
        own[b] = recomputed_logits(model, std::span(context[b].data() + n - seq, seq));
      }
      cached = cached || fits;
      step[b] = fits ? context[b].back() : 0;
      if (!fits) cache.set_length(static_cast<int64_t>(b), std::min(n - 1, cache.capacity() - 1));
    }
    if (!cached) continue;
    logits = forward(step, 1, rows);
    for (size_t b = 0; b < entries; ++b) {
      if (!done[b] && static_cast<int64_t>(context[b].size()) <= seq) {
        cache.set_length(static_cast<int64_t>(b), static_cast<int64_t>(context[b].size()));
      }
    }
  }
  return out;
}

}  // namespace

bool cache_supported(const nn::Gpt& model) {
  const parallel::ParallelContext& pc = *model.context();
  return !pc.sequence_parallel() && pc.exec.device().is_cpu();
}

void check_prompts(const nn::Gpt& model, const std::vector<std::vector<int32_t>>& prompts) {
  const nn::GptConfig& cfg = model.config();
  WEFT_CHECK(!prompts.empty(), "no prompt to continue: give at least one");
  for (size_t p = 0; p < prompts.size(); ++p) {
    const std::string which = prompts.size() > 1 ? format("prompt {}", p + 1) : "the prompt";
    WEFT_CHECK(!prompts[p].empty(), "{} is empty: give at least one token", which);
    WEFT_CHECK(static_cast<int64_t>(prompts[p].size()) <= cfg.seq,
               "{} has {} tokens, more than the model's context of {}: shorten it", which,
               prompts[p].size(), cfg.seq);
    for (size_t i = 0; i < prompts[p].size(); ++i) {
      WEFT_CHECK(prompts[p][i] >= 0 && prompts[p][i] < cfg.vocab,
                 "{}: token {} (at position {}) is outside the model's vocabulary of {}", which,
                 prompts[p][i], i, cfg.vocab);
    }
  }
}

std::vector<std::vector<int32_t>> generate(nn::Gpt& model,
                                           const std::vector<std::vector<int32_t>>& prompts,
                                           const GenerateOptions& options) {
  // Under context parallelism the model's forward cuts every sequence into
  // the cp ranks' chunks; generation's windows and its cache are whole.
  WEFT_CHECK(model.context()->cp_size() == 1,
             "generation runs without context parallelism, and this model runs at --cp {}: "
             "save a checkpoint and use weft generate (one rank per TP rank)",
             model.context()->cp_size());
  check_prompts(model, prompts);
  check(options.sampling());
  WEFT_CHECK(options.tokens >= 0, "--tokens must be >= 0, got {}", options.tokens);
  if (options.tokens == 0) return std::vector<std::vector<int32_t>>(prompts.size());
  if (options.cache && cache_supported(model)) return generate_cached(model, prompts, options);
  std::vector<std::vector<int32_t>> out;
  for (size_t p = 0; p < prompts.size(); ++p) {
    out.push_back(generate_recomputing(model, prompts[p], options, options.seed + p));
  }
  return out;
}

std::vector<int32_t> generate(nn::Gpt& model, const std::vector<int32_t>& prompt,
                              const GenerateOptions& options) {
  return generate(model, std::vector<std::vector<int32_t>>{prompt}, options).front();
}

std::string valid_utf8(std::string_view s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) >> 6) == 0x2;
    if (ok && n > 1) {
      // Reject overlong forms, surrogates and code points above U+10FFFF.
      uint32_t cp = c & (0x7f >> n);
      for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
      const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
      ok = cp >= min[n] && cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff);
    }
    if (ok) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xef\xbf\xbd";
      ++i;
    }
  }
  return out;
}

}  // namespace weft::infer
