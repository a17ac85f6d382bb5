// Under mpirun with 2 ranks: rank 1 exits while the ranks save their second
// checkpoint. usage: mpi_save_fault DIR
//
// Both ranks save DIR/step-000002 and publish it (DIR/latest); then they save
// DIR/step-000004, and rank 1 leaves the job (_exit, no MPI_Finalize) in the
// middle of writing its files. The job must end by itself within the
// communication timeout, and DIR/latest must still name the complete
// step-000002 (save_fault.cmake checks both, and that it verifies).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "weft/comm/grid.h"
#include "weft/comm/world.h"
#include "weft/io/checkpoint.h"
#include "weft/io/checkpoint_dir.h"
#include "weft/nn/gpt.h"
#include "weft/optim/adamw.h"
#include "weft/parallel/rng.h"

namespace {

// The model, but on the rank that `exits` asking for its parameters ends the
// process: the rank dies in the middle of writing its files.
class Exiting : public weft::nn::Module {
 public:
  Exiting(weft::nn::Module& inner, bool exits) : inner_(inner), exits_(exits) {}
  weft::Tensor forward(weft::nn::Ctx&, const weft::Tensor& x) override { return x; }
  weft::Tensor backward(weft::nn::Ctx&, const weft::Tensor& dy) override { return dy; }
  std::vector<weft::nn::Module*> children() override {
    if (exits_) {
      std::fprintf(stderr, "rank 1 exits while saving\n");
      ::_exit(3);
    }
    return {&inner_};
  }

 private:
  weft::nn::Module& inner_;
  bool exits_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR (under mpirun -np 2)\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  weft::comm::run_world(2, [&](weft::comm::ProcessGroup& world) {
    world.set_timeout(std::chrono::seconds(5));
    weft::comm::Grid grid(world, "tp-dp", {{"tp", world.size()}});
    weft::nn::GptConfig cfg;
    cfg.vocab = 64;
    cfg.seq = 8;
    cfg.layers = 1;
    cfg.width = 16;
    cfg.heads = 2;
    weft::nn::Gpt model(weft::parallel::make_context(grid.group_ptr("tp")), cfg);
    weft::optim::AdamW opt(model.parameters(), {});
    weft::io::TrainState state;
    state.rng = weft::parallel::RngTracker(model.context()->seed, grid.rank_in("tp")).state();
    state.config = weft::io::model_shape_json(cfg);
    for (int64_t step : {2, 4}) {
      state.step = step;
      Exiting saved(model, step == 4 && world.rank() == 1);
      weft::io::save_checkpoint(dir + "/" + weft::io::step_dir_name(step), world, grid, saved, &opt,
                                state);
      weft::io::publish_checkpoint(dir, step, 0, false, world);
    }
  });
  return 0;
}
