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

std::vector<std::string> Module::parameters_elsewhere() {
  std::vector<std::string> out = own_parameters_elsewhere();
  for (Module* c : children()) {
    std::vector<std::string> sub = c->parameters_elsewhere();
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

void Module::zero_grad() {
  for (Parameter* p : parameters()) p->grad.zero();
}

}  // namespace weft::nn
