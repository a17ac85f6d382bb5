// A checkpoint directory (train/checkpoint*.h): index.json, rank0.json and
// rank1.json come from the input (separated by NUL bytes; a file the input
// does not reach is absent), the tensor shards are real ones of a tiny model
// saved at TP 2. Reads the directory every way weft does: CheckpointReader
// (every tensor, the random streams), read_checkpoint_config (what --resume
// and --init read first), load_checkpoint at TP 1 and at TP 2 (the saved
// layout: each rank's own streams), and load_for_inference (eval, generate).
#include <filesystem>

#include "fixtures.h"
#include "fuzz.h"
#include "weft/io/checkpoint_format.h"
#include "weft/train/load_model.h"

namespace {

namespace wt = weft::train;

void load_at(const std::string& dir, int tp) {
  weft::comm::run_local(tp, [&](weft::comm::ProcessGroup& world) {
    weft::set_num_threads(1);
    weft::comm::Grid grid(world, "tp-dp", {{"tp", tp}});
    weft::nn::Gpt model(wt::model_context(weft::fuzz::tiny_config(), grid.group_ptr("tp")),
                        wt::model_config(weft::fuzz::tiny_config()));
    weft::optim::AdamW opt(model.parameters(), {});
    (void)weft::io::load_checkpoint(dir, world, grid, model, &opt);
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    weft::set_num_threads(1);
    const std::string d = weft::fuzz::scratch_dir() + "/ckpt";
    weft::fuzz::save_tiny_checkpoint(d);
    return d;
  }();
  const auto parts = weft::fuzz::split({reinterpret_cast<const char*>(data), size}, '\0', 3);
  const char* names[] = {"index.json", "rank0.json", "rank1.json"};
  for (size_t i = 0; i < 3; ++i) {
    const std::string path = dir + "/" + names[i];
    if (i < parts.size()) {
      weft::fuzz::write_file(path, parts[i]);
    } else {
      std::filesystem::remove(path);
    }
  }

  weft::fuzz::refused_ok([&] {
    const weft::io::CheckpointReader ck(dir);
    (void)ck.step();
    (void)ck.order();
    (void)ck.sizes();
    (void)ck.has_optimizer();
    const int world = ck.world();
    for (int r = 0; r < world && r < 4; ++r) {
      weft::fuzz::refused_ok([&] { (void)ck.rank_rng(r); });
    }
    for (const auto* list : {&ck.tensors(), &ck.optimizer_tensors()}) {
      for (const weft::io::SavedTensor& t : *list) {
        weft::fuzz::refused_ok([&] { (void)ck.read_full(t); });
      }
    }
  });
  weft::fuzz::refused_ok([&] { (void)wt::read_checkpoint_config(dir); });
  weft::fuzz::refused_ok([&] { load_at(dir, 1); });
  weft::fuzz::refused_ok([&] { load_at(dir, 2); });
  weft::fuzz::refused_ok([&] { (void)wt::load_for_inference(dir, weft::DType::f32); });
  return 0;
}
