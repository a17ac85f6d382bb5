// One training step of a tiny tensor-parallel GPT on two rank threads,
// through the installed headers and library. The loss of the freshly
// initialised byte-level model must be finite and plausible: below ln 256 =
// 5.55, because the targets are the inputs themselves and the tied embedding
// already favours them (it is 4.54), and far above 0.
#include <cmath>
#include <cstdio>
#include <vector>

#include "weft/comm/grid.h"
#include "weft/comm/local.h"
#include "weft/nn/gpt.h"
#include "weft/optim/adamw.h"

int main() {
  float loss = 0;
  weft::comm::run_local(2, [&](weft::comm::ProcessGroup& world) {
    weft::comm::Grid grid(world, "tp-dp", {{"tp", 2}});
    weft::nn::GptConfig cfg = weft::nn::gpt_preset("tiny");
    cfg.layers = 1;
    cfg.seq = 8;
    weft::nn::Gpt model(weft::parallel::make_context(grid.group_ptr("tp")), cfg);
    weft::optim::AdamW adamw(model.parameters(), {});
    std::vector<int32_t> ids(16);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>('a' + i);
    weft::Tensor tokens = weft::Tensor::from_i32({2, 8}, ids);
    weft::nn::Ctx ctx;
    const float l = model.forward_loss(ctx, tokens, tokens);
    model.backward_loss(ctx);
    adamw.step(1e-3f);
    if (world.rank() == 0) loss = l;
  });
  std::printf("consumer: loss %.4f on 2 ranks\n", loss);
  if (!std::isfinite(loss) || loss < 4 || loss > 7) {
    std::fprintf(stderr, "consumer: the loss is not in [4, 7] (ln 256 = 5.55)\n");
    return 1;
  }
  return 0;
}
