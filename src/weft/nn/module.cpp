#include "weft/nn/module.h"

namespace weft::nn {

std::vector<Parameter*> Module::parameters() {
  std::vector<Parameter*> out = own_parameters();
  for (Module* c : children()) {
    std::vector<Parameter*> sub = c->parameters();
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

void Module::zero_grad() {
  for (Parameter* p : parameters()) p->grad.zero();
}

}  // namespace weft::nn
