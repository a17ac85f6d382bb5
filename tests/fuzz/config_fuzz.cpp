// A --config file of `weft train`: the input is the file. Parsed as JSON and
// applied over the defaults as train.cpp does, then checked (validate) and
// turned into the model's config; the saved-settings filters a checkpoint
// uses (resumable_settings, shape_settings) are applied too. What applies
// cleanly must survive the round trip through to_json(): applying the
// written settings to fresh defaults gives the same settings.
#include <cstdlib>

#include "fuzz.h"
#include "weft/train/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace wt = weft::train;
  weft::fuzz::refused_ok([&] {
    const weft::io::Json file =
        weft::io::parse_json({reinterpret_cast<const char*>(data), size}, "run.json");
    weft::fuzz::refused_ok([&] {
      wt::TrainConfig cfg;
      wt::apply_settings(cfg, wt::resumable_settings(file), "checkpoint");
    });
    weft::fuzz::refused_ok([&] {
      wt::TrainConfig cfg;
      wt::apply_settings(cfg, wt::shape_settings(file), "init");
    });
    wt::TrainConfig cfg;
    wt::apply_settings(cfg, file, "run.json");
    const weft::io::Json written = cfg.to_json();
    wt::TrainConfig again;
    wt::apply_settings(again, written, "to_json");
    if (!(again.to_json() == written)) std::abort();
    wt::validate(cfg);
    (void)wt::model_config(cfg);
    (void)wt::model_context(cfg, nullptr);
  });
  return 0;
}
