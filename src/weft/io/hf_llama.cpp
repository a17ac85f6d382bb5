#include "weft/io/hf_llama.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>
#include <utility>

#include "weft/io/checkpoint.h"
#include "weft/nn/gpt.h"

namespace weft::io {

namespace {

// The fields of one head layout.
struct Heads {
  int64_t heads, kv_heads, head_dim;
};

Heads heads_of(const Json& shape) {
  const int64_t heads = shape.at("heads").as_int();
  const Json* kv = shape.find("kv_heads");
  const int64_t kv_heads = kv && kv->as_int() > 0 ? kv->as_int() : heads;
  WEFT_CHECK(
      heads > 0 && kv_heads > 0 && heads % kv_heads == 0 && shape.at("width").as_int() % heads == 0,
      "the model shape {} has no whole heads", shape.dump());
  return {heads, kv_heads, shape.at("width").as_int() / heads};
}

// out's block i (of `n` blocks along `dim`, 0 rows or 1 columns) is t's
// block src(i).
template <typename Src>
Tensor permute_blocks(const Tensor& t, int dim, int64_t n, Src src) {
  WEFT_CHECK(t.dim() == 2 && t.dtype() == DType::f32 && t.size(dim) % n == 0,
             "cannot split a {} tensor into {} head blocks along dimension {}", t.shape(), n, dim);
  const int64_t rows = t.size(0), cols = t.size(1), b = t.size(dim) / n;
  Tensor out = Tensor::empty({rows, cols});
  const float* in = t.data<float>();
  float* o = out.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t at = dim == 0 ? r : c;
      const int64_t from = src(at / b) * b + at % b;
      o[r * cols + c] = in[dim == 0 ? from * cols + c : r * cols + from];
    }
  }
  return out;
}

// Hugging Face head h = g·n_rep + b is weft head p = b·Hkv + g.
int64_t weft_head_of(int64_t h, int64_t heads, int64_t kv_heads) {
  const int64_t n_rep = heads / kv_heads;
  return (h % n_rep) * kv_heads + h / n_rep;
}
int64_t hf_head_of(int64_t p, int64_t heads, int64_t kv_heads) {
  const int64_t n_rep = heads / kv_heads;
  return (p % kv_heads) * n_rep + p / kv_heads;
}

Tensor cat_rows(const std::vector<Tensor>& parts) {
  int64_t rows = 0;
  for (const Tensor& p : parts) rows += p.size(0);
  Tensor out = Tensor::empty({rows, parts.front().size(1)});
  int64_t at = 0;
  for (const Tensor& p : parts) {
    out.narrow(at, p.size(0)).copy_from(p);
    at += p.size(0);
  }
  return out;
}

// "h.12.attn.qkv.weight" -> {12, "attn.qkv.weight"}.
std::optional<std::pair<int64_t, std::string>> block_param(const std::string& name) {
  if (!name.starts_with("h.")) return std::nullopt;
  size_t i = 2;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
  if (i == 2 || i >= name.size() || name[i] != '.') return std::nullopt;
  return std::pair{std::stoll(name.substr(2, i - 2)), name.substr(i + 1)};
}

std::string layer_prefix(int64_t n) { return format("model.layers.{}.", n); }

// The shortest decimal that reads back as the float (1e-05 for 1e-5f, not
// 9.99999974737875e-06), as Python writes the config's floats.
double float_as_decimal(double value) {
  char text[32];
  const auto end = std::to_chars(text, text + sizeof text, static_cast<float>(value)).ptr;
  return std::strtod(std::string(text, end).c_str(), nullptr);
}

// One Llama config.json field read as an integer (`fallback` when absent or
// null and fallback >= 0).
int64_t config_int(const Json& c, const char* key, const std::string& where,
                   int64_t fallback = -1) {
  const Json* v = c.find(key);
  if ((!v || v->is_null()) && fallback >= 0) return fallback;
  WEFT_CHECK(v && v->is_integer() && v->as_int() > 0, "{} has no positive integer {}", where, key);
  return v->as_int();
}

double config_number(const Json& c, const char* key, const std::string& where, double fallback) {
  const Json* v = c.find(key);
  if (!v || v->is_null()) return fallback;
  WEFT_CHECK(v->is_number() && v->as_double() > 0 && std::isfinite(v->as_double()),
             "{}: {} {} is not a positive number", where, key, v->dump());
  return v->as_double();
}

// The LlamaConfig fields whose other values weft does not compute: refused by
// name, with what to do, rather than evaluated as another model.
void check_llama_math(const Json& c, const std::string& where) {
  auto null_or_absent = [&](const char* key) {
    const Json* v = c.find(key);
    return !v || v->is_null();
  };
  WEFT_CHECK(null_or_absent("rope_scaling"),
             "{}: rope_scaling {} is not supported; weft's rotary positions are unscaled (Llama "
             "2's): use a model without rope_scaling",
             where, c.find("rope_scaling") ? c.at("rope_scaling").dump() : "");
  if (const Json* p = c.find("rope_parameters"); p && p->is_object()) {
    const Json* type = p->find("rope_type");
    WEFT_CHECK(!type || type->is_null() || *type == Json("default"),
               "{}: rope_parameters.rope_type {} is not supported; weft's rotary positions are "
               "unscaled (rope_type \"default\")",
               where, type ? type->dump() : "");
  }
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    const Json* v = c.find(key);
    WEFT_CHECK(!v || *v == Json(false),
               "{}: {} {} is not supported; weft's Llama has no biases in its Linear layers", where,
               key, v ? v->dump() : "");
  }
  const Json* act = c.find("hidden_act");
  WEFT_CHECK(!act || *act == Json("silu"),
             "{}: hidden_act {} is not supported; weft's SwiGLU MLP uses silu", where,
             act ? act->dump() : "");
  WEFT_CHECK(null_or_absent("sliding_window"),
             "{}: sliding_window {} is not supported; weft's attention sees every earlier "
             "position: set it to null",
             where, c.find("sliding_window") ? c.at("sliding_window").dump() : "");
  const Json* tp = c.find("pretraining_tp");
  WEFT_CHECK(!tp || tp->is_null() || *tp == Json(1),
             "{}: pretraining_tp {} is not supported; weft computes the projections whole "
             "(pretraining_tp 1)",
             where, tp ? tp->dump() : "");
}

// LlamaConfig -> the architecture of weft's Llama.
nn::GptConfig llama_from_config(const Json& c, const std::string& where) {
  check_llama_math(c, where);
  nn::GptConfig cfg = nn::gpt_preset("llama-tiny");
  cfg.vocab = config_int(c, "vocab_size", where);
  cfg.width = config_int(c, "hidden_size", where);
  cfg.layers = config_int(c, "num_hidden_layers", where);
  cfg.heads = config_int(c, "num_attention_heads", where);
  cfg.kv_heads = config_int(c, "num_key_value_heads", where, cfg.heads);
  cfg.hidden = config_int(c, "intermediate_size", where);
  cfg.seq = config_int(c, "max_position_embeddings", where);
  WEFT_CHECK(cfg.width % cfg.heads == 0,
             "{}: hidden_size {} is not divisible by num_attention_heads {}", where, cfg.width,
             cfg.heads);
  const Json* head_dim = c.find("head_dim");
  WEFT_CHECK(!head_dim || head_dim->is_null() || *head_dim == Json(cfg.width / cfg.heads),
             "{}: head_dim {} is not supported; weft's heads are hidden_size / "
             "num_attention_heads = {} wide",
             where, head_dim ? head_dim->dump() : "", cfg.width / cfg.heads);
  cfg.norm_eps = static_cast<float>(config_number(c, "rms_norm_eps", where, 1e-6));
  double theta = 10000.0;
  if (const Json* p = c.find("rope_parameters"); p && p->is_object()) {
    theta = config_number(*p, "rope_theta", where + " rope_parameters", theta);
  }
  cfg.rope_theta = config_number(c, "rope_theta", where, theta);
  const Json* tie = c.find("tie_word_embeddings");
  WEFT_CHECK(!tie || tie->is_bool(), "{}: tie_word_embeddings {} is not true or false", where,
             tie ? tie->dump() : "");
  cfg.tied_head = tie && tie->as_bool();
  if (const Json* experts = c.find("num_local_experts"); experts && !experts->is_null()) {
    cfg.moe_experts = config_int(c, "num_local_experts", where);
    cfg.moe_top_k = config_int(c, "num_experts_per_tok", where, 2);
    // weft's top-1 gate is Switch's (the chosen expert's probability); Mixtral
    // renormalizes it to 1.
    WEFT_CHECK(cfg.moe_top_k == 2,
               "{}: num_experts_per_tok {} is not supported; weft computes Mixtral's gates for "
               "top-2 routing",
               where, cfg.moe_top_k);
    cfg.moe_every = 1;
  }
  return cfg;
}

// A MoE layer's parameter within its block: "mlp.router.weight",
// "mlp.fc1.experts.<e>.weight" (gate over up, as Mixtral's w1 over w3) or
// "mlp.fc2.experts.<e>.weight" (w2).
struct MoePart {
  enum What { router, fc1, fc2 } what;
  int64_t expert = 0;
};
std::optional<MoePart> moe_part(const std::string& part) {
  if (part == "mlp.router.weight") return MoePart{MoePart::router};
  for (auto [prefix, what] :
       {std::pair{"mlp.fc1.experts.", MoePart::fc1}, std::pair{"mlp.fc2.experts.", MoePart::fc2}}) {
    const std::string p = prefix;
    if (!part.starts_with(p) || !part.ends_with(".weight")) continue;
    const std::string digits = part.substr(p.size(), part.size() - p.size() - 7);
    if (digits.empty() || digits.size() > 9 ||
        !std::all_of(digits.begin(), digits.end(),
                     [](unsigned char ch) { return std::isdigit(ch) != 0; }))
      continue;
    return MoePart{what, std::stoll(digits)};
  }
  return std::nullopt;
}

// How a weft parameter is spelled in a Hugging Face Llama (Mixtral) file, for
// import and export alike: the tensors whose rows, concatenated in this order,
// are the weft tensor (gate over up; q, k, v; Mixtral's w1 over w3), and the
// head permutation q_proj or o_proj takes. Nothing for a name outside the map.
struct HfParts {
  std::vector<std::string> names;
  enum Heads { none, q, o } heads = none;
};
std::optional<HfParts> hf_parts(const std::string& name) {
  if (name == "wte.weight") return HfParts{{"model.embed_tokens.weight"}};
  if (name == "ln_f.weight") return HfParts{{"model.norm.weight"}};
  if (name == "lm_head.weight") return HfParts{{"lm_head.weight"}};
  const auto block = block_param(name);
  if (!block) return std::nullopt;
  const std::string at = layer_prefix(block->first);
  const std::string& part = block->second;
  if (part == "ln_1.weight") return HfParts{{at + "input_layernorm.weight"}};
  if (part == "ln_2.weight") return HfParts{{at + "post_attention_layernorm.weight"}};
  if (part == "mlp.fc1.weight") {
    return HfParts{{at + "mlp.gate_proj.weight", at + "mlp.up_proj.weight"}};
  }
  if (part == "mlp.fc2.weight") return HfParts{{at + "mlp.down_proj.weight"}};
  if (part == "attn.qkv.weight") {
    return HfParts{{at + "self_attn.q_proj.weight", at + "self_attn.k_proj.weight",
                    at + "self_attn.v_proj.weight"},
                   HfParts::q};
  }
  if (part == "attn.proj.weight") return HfParts{{at + "self_attn.o_proj.weight"}, HfParts::o};
  if (const auto moe = moe_part(part)) {
    const std::string expert = format("{}block_sparse_moe.experts.{}.", at, moe->expert);
    switch (moe->what) {
      case MoePart::router: return HfParts{{at + "block_sparse_moe.gate.weight"}};
      case MoePart::fc1: return HfParts{{expert + "w1.weight", expert + "w3.weight"}};
      case MoePart::fc2: return HfParts{{expert + "w2.weight"}};
    }
  }
  return std::nullopt;
}

// The full Hugging Face tensor for a weft parameter, as weft lays it out
// (before padding); the names read are added to `used`.
Tensor weft_tensor(const HfModelFiles& f, const std::string& name, const Heads& h,
                   std::set<std::string>& used) {
  auto take = [&](const std::string& hf) {
    WEFT_CHECK(f.find(hf), "{} has no tensor {} (for parameter {})", f.path(), hf, name);
    used.insert(hf);
    Tensor t = f.load(hf).to(DType::f32);
    WEFT_CHECK(t.dim() >= 1, "{}: {} is a scalar", f.path(), hf);
    return t;
  };
  auto matrices = [&](std::vector<Tensor> parts) {
    for (const Tensor& p : parts) {
      WEFT_CHECK(p.dim() == 2 && p.size(1) == parts.front().size(1),
                 "{}: the parts of {} must be matrices of one width", f.path(), name);
    }
    return cat_rows(parts);
  };
  const auto parts = hf_parts(name);
  WEFT_CHECK(parts, "parameter {} has no Hugging Face Llama name", name);
  std::vector<Tensor> tensors;
  for (const std::string& hf : parts->names) tensors.push_back(take(hf));
  Tensor& first = tensors.front();
  if (parts->heads == HfParts::q) {
    WEFT_CHECK(first.dim() == 2 && first.size(0) == h.heads * h.head_dim,
               "{}: {} has shape {}, not ({}, *)", f.path(), parts->names.front(), first.shape(),
               h.heads * h.head_dim);
    first = llama_q_from_hf(first, h.heads, h.kv_heads);
  } else if (parts->heads == HfParts::o) {
    WEFT_CHECK(first.dim() == 2 && first.size(1) == h.heads * h.head_dim,
               "{}: {} has shape {}, not (*, {})", f.path(), parts->names.front(), first.shape(),
               h.heads * h.head_dim);
    return llama_o_from_hf(first, h.heads, h.kv_heads);
  }
  return tensors.size() == 1 ? first : matrices(std::move(tensors));
}

}  // namespace

Tensor llama_q_to_hf(const Tensor& q, int64_t heads, int64_t kv_heads) {
  return permute_blocks(q, 0, heads, [&](int64_t h) { return weft_head_of(h, heads, kv_heads); });
}
Tensor llama_q_from_hf(const Tensor& q, int64_t heads, int64_t kv_heads) {
  return permute_blocks(q, 0, heads, [&](int64_t p) { return hf_head_of(p, heads, kv_heads); });
}
Tensor llama_o_to_hf(const Tensor& o, int64_t heads, int64_t kv_heads) {
  return permute_blocks(o, 1, heads, [&](int64_t h) { return weft_head_of(h, heads, kv_heads); });
}
Tensor llama_o_from_hf(const Tensor& o, int64_t heads, int64_t kv_heads) {
  return permute_blocks(o, 1, heads, [&](int64_t p) { return hf_head_of(p, heads, kv_heads); });
}

HfArchitecture hf_architecture_of(const Json& shape, const std::string& what) {
  const nn::GptConfig cfg = apply_model_shape(nn::GptConfig{}, shape);
  auto refuse = [&](const char* key, const std::string& value, const char* model) {
    WEFT_FAIL(
        "{} has {} {}, which a Hugging Face {} does not: only GPT-2, Llama and Mixtral "
        "architectures export",
        what, key, value, model);
  };
  if (cfg.positions == nn::PositionKind::rotary) {
    if (cfg.norm != nn::NormKind::rms) refuse("norm", "layernorm", "Llama (RMSNorm)");
    if (cfg.mlp != nn::MlpKind::swiglu) refuse("mlp", nn::mlp_kind_name(cfg.mlp), "Llama (SwiGLU)");
    if (cfg.moe_experts > 0) {
      // Mixtral: every layer MoE, dropless, Mixtral's top-2 gates.
      if (cfg.moe_every != 1) refuse("moe_every", std::to_string(cfg.moe_every), "Mixtral");
      if (cfg.moe_capacity_factor != 0.0f) refuse("moe_capacity_factor", "set", "Mixtral");
      if (cfg.moe_top_k != 2) refuse("moe_top_k", std::to_string(cfg.moe_top_k), "Mixtral");
    }
    WEFT_CHECK(!cfg.bias,
               "{} is a Llama with biases (bias true): Hugging Face's attention_bias and "
               "mlp_bias are not implemented in weft's export; train the model with --bias false",
               what);
    return HfArchitecture::llama;
  }
  const char* gpt2 = "GPT-2 (learned positions)";
  if (cfg.norm != nn::NormKind::layer) refuse("norm", "rmsnorm", gpt2);
  if (cfg.mlp != nn::MlpKind::gelu) refuse("mlp", nn::mlp_kind_name(cfg.mlp), gpt2);
  if (!cfg.bias) refuse("bias", "false", gpt2);
  if (!cfg.tied_head) refuse("tied_head", "false", gpt2);
  if (cfg.kv_head_count() != cfg.heads) refuse("kv_heads", std::to_string(cfg.kv_heads), gpt2);
  if (cfg.mlp_hidden() != 4 * cfg.width) refuse("hidden", std::to_string(cfg.hidden), gpt2);
  if (cfg.norm_eps != 1e-5f) refuse("norm_eps", Json(cfg.norm_eps).dump(), gpt2);
  return HfArchitecture::gpt2;
}

std::vector<NamedTensor> llama_hf_tensors(const CheckpointReader& ck, const Json& shape) {
  const Heads h = heads_of(shape);
  const int64_t q_rows = h.heads * h.head_dim, kv_rows = h.kv_heads * h.head_dim;
  std::vector<NamedTensor> out;
  for (const SavedTensor& t : ck.tensors()) {
    Tensor full = ck.read_full(t).to(DType::f32);
    if (t.valid_rows >= 0 && t.valid_rows < full.size(0)) full = full.narrow(0, t.valid_rows);
    const auto parts = hf_parts(t.name);
    WEFT_CHECK(parts, "parameter {} has no Hugging Face Llama name", t.name);
    // The rows of each Hugging Face tensor: q, k, v by the heads; gate and up
    // (w1 and w3) halves; else the whole.
    std::vector<int64_t> rows;
    if (parts->heads == HfParts::q) {
      WEFT_CHECK(full.size(0) == q_rows + 2 * kv_rows, "{} has shape {}: not ({}, *)", t.name,
                 full.shape(), q_rows + 2 * kv_rows);
      rows = {q_rows, kv_rows, kv_rows};
    } else {
      const auto n = static_cast<int64_t>(parts->names.size());
      rows.assign(parts->names.size(), full.size(0) / n);
    }
    int64_t at = 0;
    for (size_t i = 0; i < parts->names.size(); ++i) {
      Tensor piece = full.narrow(at, rows[i]);
      at += rows[i];
      if (i == 0 && parts->heads == HfParts::q) piece = llama_q_to_hf(piece, h.heads, h.kv_heads);
      if (parts->heads == HfParts::o) piece = llama_o_to_hf(piece, h.heads, h.kv_heads);
      out.push_back({parts->names[i], piece});
    }
  }
  return out;
}

Json llama_config(const Json& shape) {
  const nn::GptConfig cfg = apply_model_shape(nn::GptConfig{}, shape);
  Json c = Json::object();
  c["architectures"] = Json(Json::Array{Json("LlamaForCausalLM")});
  c["model_type"] = "llama";
  c["vocab_size"] = cfg.vocab;
  c["hidden_size"] = cfg.width;
  c["intermediate_size"] = cfg.mlp_hidden();
  c["num_hidden_layers"] = cfg.layers;
  c["num_attention_heads"] = cfg.heads;
  c["num_key_value_heads"] = cfg.kv_head_count();
  c["head_dim"] = cfg.width / cfg.heads;
  c["max_position_embeddings"] = cfg.seq;
  c["rms_norm_eps"] = float_as_decimal(cfg.norm_eps);
  c["rope_theta"] = cfg.rope_theta;
  c["rope_scaling"] = nullptr;
  c["hidden_act"] = "silu";
  c["tie_word_embeddings"] = cfg.tied_head;
  c["attention_bias"] = false;
  c["mlp_bias"] = false;
  c["attention_dropout"] = 0.0;
  c["pretraining_tp"] = 1;
  c["initializer_range"] = float_as_decimal(cfg.init_std);
  // The last id is the end-of-text token, as in GPT-2's export.
  c["bos_token_id"] = cfg.vocab - 1;
  c["eos_token_id"] = cfg.vocab - 1;
  c["torch_dtype"] = "float32";
  c["use_cache"] = true;
  if (cfg.moe_experts > 0) {
    c["architectures"] = Json(Json::Array{Json("MixtralForCausalLM")});
    c["model_type"] = "mixtral";
    c["num_local_experts"] = cfg.moe_experts;
    c["num_experts_per_tok"] = cfg.moe_top_k;
    c["router_aux_loss_coef"] = float_as_decimal(cfg.moe_aux_coef);
    c["output_router_logits"] = false;
    c["router_jitter_noise"] = 0.0;
    c["sliding_window"] = nullptr;
  }
  return c;
}

bool is_llama_files(const HfModelFiles& f, const Json& config) {
  if (const Json* t = config.is_object() ? config.find("model_type") : nullptr) {
    WEFT_CHECK(*t == Json("llama") || *t == Json("mixtral") || *t == Json("gpt2"),
               "{}: model_type {} is not supported; weft reads GPT-2 (model_type \"gpt2\"), "
               "Llama (\"llama\") and Mixtral (\"mixtral\") models",
               f.config_path(), t->dump());
    return *t != Json("gpt2");
  }
  return f.find("model.embed_tokens.weight") != nullptr;
}

Json llama_shape(const HfModelFiles& f, const Json& config) {
  nn::GptConfig cfg;
  Json weft_model;
  if (auto it = f.metadata().find("weft.model"); it != f.metadata().end()) {
    weft_model = parse_json(it->second, f.path() + " weft.model metadata");
  }
  if (config.is_object()) {
    cfg = llama_from_config(config, f.config_path());
  } else {
    WEFT_CHECK(weft_model.is_object(),
               "cannot tell the shape of the Llama model {}: put its config.json next to it",
               f.path());
    cfg = apply_model_shape(nn::gpt_preset("llama-tiny"), weft_model);
    WEFT_CHECK(hf_architecture_of(model_shape_json(cfg), f.path()) == HfArchitecture::llama,
               "{}: its weft.model metadata is not a Llama's", f.path());
  }
  if (weft_model.is_object() && weft_model.find("vocab_pad")) {
    cfg.vocab_pad = weft_model.at("vocab_pad").as_int();
  } else {
    cfg.vocab_pad = nn::kDefaultVocabPad;
  }
  const TensorInfo& embed = f.info("model.embed_tokens.weight");
  WEFT_CHECK(embed.shape == std::vector<int64_t>({cfg.vocab, cfg.width}),
             "{}: model.embed_tokens.weight is not (vocab_size {}, hidden_size {})", f.path(),
             cfg.vocab, cfg.width);
  int64_t layers = 0;
  while (f.find(format("model.layers.{}.input_layernorm.weight", layers))) ++layers;
  WEFT_CHECK(layers == cfg.layers, "{} has {} layers, but its shape says num_hidden_layers {}",
             f.path(), layers, cfg.layers);
  nn::validate(cfg);
  return model_shape_json(cfg);
}

void load_llama_hf(const HfModelFiles& f, nn::Module& model, bool allow_nonfinite) {
  std::set<std::string> used;
  std::optional<Heads> heads;
  if (auto* gpt = dynamic_cast<nn::Gpt*>(&model)) heads = heads_of(model_shape_json(gpt->config()));
  WEFT_CHECK(heads, "only a weft GPT model loads Llama files");
  for (nn::Parameter* p : model.parameters()) {
    Tensor t = weft_tensor(f, p->name, *heads, used);
    if (!allow_nonfinite) check_finite(t, "tensor for " + p->name, f.path());
    const Shape& global = p->spec.global_shape;
    if (p->spec.valid_rows >= 0 && t.dim() == 2 && t.size(0) == p->spec.valid_rows &&
        global[0] > t.size(0)) {
      Tensor padded = Tensor::zeros(global);
      padded.narrow(0, t.size(0)).copy_from(t);
      t = padded;
    }
    WEFT_CHECK(t.shape() == global, "{}: the tensors for {} make shape {}, but it needs {}",
               f.path(), p->name, t.shape(), global);
    p->value.copy_from(nn::shard_of(p->spec, t));
    ++p->version;  // weight sources recast it
  }
  for (const TensorInfo* info : f.tensors()) {
    const std::string& name = info->name;
    if (used.count(name) || name.ends_with(".rotary_emb.inv_freq")) continue;
    if (name == "lm_head.weight") {
      // A tied model's file may hold the head too: it must be the embedding.
      WEFT_CHECK(f.load(name).to(DType::f32).to_vector() ==
                     f.load("model.embed_tokens.weight").to(DType::f32).to_vector(),
                 "{}: lm_head.weight differs from model.embed_tokens.weight, but "
                 "tie_word_embeddings is true",
                 f.path());
      continue;
    }
    WEFT_FAIL("{} holds tensor {}, which a weft Llama does not have: is it a Llama model?",
              f.path(), name);
  }
}

}  // namespace weft::io
