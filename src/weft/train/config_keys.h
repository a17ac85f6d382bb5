// The machinery behind TrainConfig's keys (internal to train/): where a
// value came from, the converters that check it, and the builders of the key
// table that config.cpp lists (config_keys.cpp adds the architecture keys).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "weft/train/config.h"

namespace weft::train::detail {

// Where a value came from, for messages: "--steps" on the command line (an
// empty source), "run.json: steps" elsewhere.
struct Where {
  const std::string& key;
  const std::string& source;
  std::string label() const { return source.empty() ? "--" + key : source + ": " + key; }
};

std::string spell(const io::Json& v);

int64_t to_int(const io::Json& v, const Where& w);

double to_double(const io::Json& v, const Where& w);

std::string to_string(const io::Json& v, const Where& w);

std::string to_choice(const io::Json& v, const Where& w, const std::vector<std::string>& choices);

int64_t at_least(int64_t n, int64_t lo, const Where& w);

double non_negative(double x, const Where& w);

using Setter = std::function<void(TrainConfig&, const io::Json&, const Where&)>;
using Getter = std::function<io::Json(const TrainConfig&)>;

struct KeyDef {
  ConfigKey key;
  Setter set;
  Getter get;
};

// What a preset trains with when the options do not say: the peak learning
// rate, and the longest default warmup (llm.c's 700 steps for GPT-2 124M).
struct PresetSchedule {
  double lr;
  int64_t max_warmup;
};

PresetSchedule preset_schedule(const std::string& preset);

void apply_preset(TrainConfig& c, const std::string& name);

// The keys reach their members through std::invoke: a member pointer of
// TrainConfig, or model_field(&nn::GptConfig::m) for a member of its model.
template <typename T>
auto model_field(T nn::GptConfig::*m) {
  return [m](auto& c) -> auto& { return c.model.*m; };
}
template <typename Field>
using FieldType = std::remove_cvref_t<std::invoke_result_t<Field, TrainConfig&>>;

// Integer key with a lower bound, stored in `field`.
template <typename Field>
KeyDef int_key(ConfigKey key, Field field, int64_t lo) {
  using T = FieldType<Field>;
  return {std::move(key),
          [field, lo](TrainConfig& c, const io::Json& v, const Where& w) {
            const int64_t n = at_least(to_int(v, w), lo, w);
            // A value the setting cannot hold (--tp 4294967298 into an int)
            // is refused, not wrapped around.
            WEFT_CHECK(std::in_range<T>(n), "{} must be at most {}, got {}", w.label(),
                       std::numeric_limits<T>::max(), n);
            std::invoke(field, c) = static_cast<T>(n);
          },
          [field](const TrainConfig& c) {
            return io::Json(static_cast<int64_t>(std::invoke(field, c)));
          }};
}

template <typename Field>
KeyDef number_key(ConfigKey key, Field field) {
  using T = FieldType<Field>;
  return {std::move(key),
          [field](TrainConfig& c, const io::Json& v, const Where& w) {
            std::invoke(field, c) = static_cast<T>(non_negative(to_double(v, w), w));
          },
          [field](const TrainConfig& c) {
            return io::Json(static_cast<double>(std::invoke(field, c)));
          }};
}

// A key that may be unset (null: the default its help text names), an
// integer with a lower bound or a non-negative number.
KeyDef optional_int_key(ConfigKey key, std::optional<int64_t> TrainConfig::*m, int64_t lo);

KeyDef optional_number_key(ConfigKey key, std::optional<double> TrainConfig::*m);

// A setting spelled as one of `names`, stored in `field` (a callable giving
// the member of a TrainConfig, as model_field's).
template <typename Field, typename E = FieldType<Field>>
KeyDef choice_key(ConfigKey key, Field field, std::vector<std::pair<std::string, E>> names) {
  return {std::move(key),
          [field, names](TrainConfig& c, const io::Json& v, const Where& w) {
            std::vector<std::string> choices;
            for (const auto& n : names) choices.push_back(n.first);
            const std::string s = to_choice(v, w, choices);
            for (const auto& [name, value] : names) {
              if (name == s) std::invoke(field, c) = value;
            }
          },
          [field, names](const TrainConfig& c) {
            for (const auto& [name, value] : names) {
              if (std::invoke(field, c) == value) return io::Json(name);
            }
            return io::Json(nullptr);
          }};
}

// A setting of the precision recipe, or an architecture choice of the model.
template <typename E>
KeyDef enum_key(ConfigKey key, E parallel::Precision::*m,
                std::vector<std::pair<std::string, E>> names) {
  return choice_key(
      std::move(key), [m](auto& c) -> auto& { return c.precision.*m; }, std::move(names));
}
template <typename E>
KeyDef model_choice_key(ConfigKey key, E nn::GptConfig::*m,
                        std::vector<std::pair<std::string, E>> names) {
  return choice_key(std::move(key), model_field(m), std::move(names));
}

// on|off, or a JSON boolean (as checkpoints' model shapes spell it).
KeyDef model_switch_key(ConfigKey key, bool nn::GptConfig::*m);

// The architecture options: what makes a model GPT-2 or Llama beyond its shape.
void add_architecture_keys(std::vector<KeyDef>& d);

KeyDef string_key(ConfigKey key, std::string TrainConfig::*m);

}  // namespace weft::train::detail
