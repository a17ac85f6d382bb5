#include "weft/train/config_keys.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <exception>

namespace weft::train::detail {

std::string spell(const io::Json& v) {
  return v.is_string() ? "'" + v.as_string() + "'" : v.dump();
}

int64_t to_int(const io::Json& v, const Where& w) {
  if (v.is_integer()) return v.as_int();
  if (v.is_string()) {
    const std::string& s = v.as_string();
    int64_t out = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (ec == std::errc() && end == s.data() + s.size() && !s.empty()) return out;
  }
  WEFT_FAIL("{} expects an integer, got {}", w.label(), spell(v));
}

double to_double(const io::Json& v, const Where& w) {
  if (v.is_number()) return v.as_double();
  if (v.is_string()) {
    const std::string& s = v.as_string();
    try {
      size_t used = 0;
      double out = std::stod(s, &used);
      if (used == s.size() && std::isfinite(out)) return out;
    } catch (const std::exception&) {
    }
  }
  WEFT_FAIL("{} expects a number, got {}", w.label(), spell(v));
}

std::string to_string(const io::Json& v, const Where& w) {
  WEFT_CHECK(v.is_string(), "{} expects a string, got {}", w.label(), v.dump());
  return v.as_string();
}

std::string to_choice(const io::Json& v, const Where& w, const std::vector<std::string>& choices) {
  std::string s = to_string(v, w);
  if (std::find(choices.begin(), choices.end(), s) != choices.end()) return s;
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
  WEFT_FAIL("{} must be one of {}; got '{}'", w.label(), list, s);
}

int64_t at_least(int64_t n, int64_t lo, const Where& w) {
  WEFT_CHECK(n >= lo, "{} must be at least {}, got {}", w.label(), lo, n);
  return n;
}

double non_negative(double x, const Where& w) {
  WEFT_CHECK(x >= 0, "{} must not be negative, got {}", w.label(), x);
  return x;
}

PresetSchedule preset_schedule(const std::string& preset) {
  if (preset == "gpt2-124m") return {6e-4, 700};
  if (preset == "gpt2-350m") return {3e-4, 700};     // GPT-3 Medium's peak rate
  if (preset == "llama-1b") return {4e-4, 700};      // TinyLlama's peak rate
  if (preset == "llama3-405b") return {8e-5, 8000};  // the Llama 3 paper's
  return {6e-3, 100};
}

void apply_preset(TrainConfig& c, const std::string& name) {
  nn::GptConfig shape = nn::gpt_preset(name);
  // A preset is a shape: the dropout and partition plan set elsewhere stay.
  shape.dropout = c.model.dropout;
  shape.plan = c.model.plan;
  c.preset = name;
  c.model = std::move(shape);
}

KeyDef optional_int_key(ConfigKey key, std::optional<int64_t> TrainConfig::*m, int64_t lo) {
  return {std::move(key),
          [m, lo](TrainConfig& c, const io::Json& v, const Where& w) {
            if (v.is_null()) {
              (c.*m).reset();
            } else {
              c.*m = at_least(to_int(v, w), lo, w);
            }
          },
          [m](const TrainConfig& c) { return c.*m ? io::Json(*(c.*m)) : io::Json(nullptr); }};
}

KeyDef optional_number_key(ConfigKey key, std::optional<double> TrainConfig::*m) {
  return {std::move(key),
          [m](TrainConfig& c, const io::Json& v, const Where& w) {
            if (v.is_null()) {
              (c.*m).reset();
            } else {
              c.*m = non_negative(to_double(v, w), w);
            }
          },
          [m](const TrainConfig& c) { return c.*m ? io::Json(*(c.*m)) : io::Json(nullptr); }};
}

KeyDef model_switch_key(ConfigKey key, bool nn::GptConfig::*m) {
  KeyDef def = model_choice_key(std::move(key), m, {{"on", true}, {"off", false}});
  def.set = [m, choice = def.set](TrainConfig& c, const io::Json& v, const Where& w) {
    if (v.is_bool()) {
      c.model.*m = v.as_bool();
    } else {
      choice(c, v, w);
    }
  };
  return def;
}

void add_architecture_keys(std::vector<KeyDef>& d) {
  d.push_back(int_key({"kv-heads", "N", "preset",
                       "key/value heads (grouped-query attention): a divisor of --heads, and a "
                       "multiple of --tp or a divisor of it (each head replicated on "
                       "tp/kv-heads ranks, not with --gtp); 0: --heads"},
                      model_field(&nn::GptConfig::kv_heads), 0));
  d.push_back(int_key({"hidden", "N", "preset", "MLP hidden size; 0: 4 x --width"},
                      model_field(&nn::GptConfig::hidden), 0));
  d.push_back(model_choice_key(
      {"norm", "layernorm|rmsnorm", "preset", "the blocks' and the final norm"},
      &nn::GptConfig::norm, {{"layernorm", nn::NormKind::layer}, {"rmsnorm", nn::NormKind::rms}}));
  d.push_back(number_key({"norm-eps", "X", "preset", "the norms' epsilon"},
                         model_field(&nn::GptConfig::norm_eps)));
  d.push_back(model_choice_key(
      {"mlp", "gelu|swiglu", "preset",
       "the MLP: fc1 then GELU (GPT-2), or silu(gate) x up (SwiGLU, Llama)"},
      &nn::GptConfig::mlp, {{"gelu", nn::MlpKind::gelu}, {"swiglu", nn::MlpKind::swiglu}}));
  d.push_back(model_choice_key(
      {"positions", "learned|rotary", "preset",
       "a learned position table (GPT-2's wpe) or rotary positions inside attention (Llama)"},
      &nn::GptConfig::positions,
      {{"learned", nn::PositionKind::learned}, {"rotary", nn::PositionKind::rotary}}));
  d.push_back(number_key({"rope-theta", "X", "preset", "rotary positions' base"},
                         model_field(&nn::GptConfig::rope_theta)));
  d.push_back(model_switch_key({"bias", "on|off", "preset", "biases in the Linear layers"},
                               &nn::GptConfig::bias));
  d.push_back(model_switch_key(
      {"tied-head", "on|off", "preset", "the LM head reads the token table (off: its own weight)"},
      &nn::GptConfig::tied_head));
  // Mixture of experts (nn/moe_mlp.h).
  d.push_back(int_key({"moe-experts", "N", "preset", "experts per MoE layer; 0: dense MLPs"},
                      model_field(&nn::GptConfig::moe_experts), 0));
  d.push_back(int_key({"moe-top-k", "K", "preset", "experts per token: 1 (Switch) or 2 (Mixtral)"},
                      model_field(&nn::GptConfig::moe_top_k), 1));
  d.push_back(int_key({"moe-every", "N", "preset", "every N-th layer is MoE; 1: all"},
                      model_field(&nn::GptConfig::moe_every), 1));
  d.push_back(number_key(
      {"moe-capacity-factor", "X", "preset", "expert capacity / even share (0: dropless)"},
      model_field(&nn::GptConfig::moe_capacity_factor)));
  d.push_back(number_key({"moe-aux-coef", "X", "preset", "load-balancing loss weight (0.01)"},
                         model_field(&nn::GptConfig::moe_aux_coef)));
  d.push_back(number_key({"moe-z-coef", "X", "preset", "router z-loss weight; 0: off (try 0.001)"},
                         model_field(&nn::GptConfig::moe_z_coef)));
}

KeyDef string_key(ConfigKey key, std::string TrainConfig::*m) {
  return {std::move(key),
          [m](TrainConfig& c, const io::Json& v, const Where& w) { c.*m = to_string(v, w); },
          [m](const TrainConfig& c) { return io::Json(c.*m); }};
}

}  // namespace weft::train::detail
