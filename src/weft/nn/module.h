// Module: forward(Ctx&, x) -> y and backward(Ctx&, dy) -> dx.
//
// There is no autograd graph: each module writes its own backward. What
// forward saves for backward lives in the Ctx (keyed by module), so several
// microbatches can be in flight at once, each with its own Ctx. backward
// accumulates parameter gradients (+=), which is what gradient accumulation
// over microbatches needs.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <typeindex>
#include <unordered_map>
#include <vector>

#include "weft/core/tensor.h"
#include "weft/nn/parameter.h"
#include "weft/parallel/pass.h"

namespace weft::nn {

class Module;

class Ctx : public parallel::PassContext {
 public:
  explicit Ctx(parallel::RngTracker* rng = nullptr, bool training = true)
      : PassContext(rng, training) {}
  Ctx(const Ctx&) = delete;
  Ctx& operator=(const Ctx&) = delete;

  // The state `owner` saved in forward; created (default-constructed) on
  // first use.
  template <typename T>
  T& saved(const Module* owner) {
    auto& slot = saved_[owner];
    if (!slot) slot = std::make_shared<T>();
    return *static_cast<T*>(slot.get());
  }
  // Drops what `owner` saved (after its backward).
  void release(const Module* owner) { saved_.erase(owner); }
  // The modules that hold saved state now (full recomputation drops what a
  // layer's forward added, nn/recompute.h).
  std::vector<const Module*> owners() const {
    std::vector<const Module*> out;
    out.reserve(saved_.size());
    for (const auto& [owner, state] : saved_) out.push_back(owner);
    return out;
  }

 private:
  std::unordered_map<const Module*, std::shared_ptr<void>> saved_;
};

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  virtual Tensor forward(Ctx& ctx, const Tensor& x) = 0;
  virtual Tensor backward(Ctx& ctx, const Tensor& dy) = 0;

  // This module's own parameters (not its children's).
  virtual std::vector<Parameter*> own_parameters() { return {}; }
  virtual std::vector<Module*> children() { return {}; }
  // The names of this module's own parameters that other ranks hold and this
  // one does not (expert parallelism: the other ranks' experts). A checkpoint
  // holds them; loading on this rank skips them.
  virtual std::vector<std::string> own_parameters_elsewhere() { return {}; }
  // Every parameter of the tree, depth first, in a stable order.
  std::vector<Parameter*> parameters();
  // own_parameters_elsewhere() of this module and its children.
  std::vector<std::string> parameters_elsewhere();
  void zero_grad();

  const std::string& name() const { return name_; }

 protected:
  explicit Module(std::string name) : name_(std::move(name)) {}
  std::string name_;
};

}  // namespace weft::nn
