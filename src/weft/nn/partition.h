// Which modules of a model are tensor-parallel (the partition plan), and
// re-sharding a model built without a TP group.
//
// As in the SageMaker model-parallel library, the user decides which of the
// supported modules are partitioned; the rest run data-parallel inside the
// TP group: every rank holds their full parameters (replicated over "tp"),
// and under sequence parallelism their gradients are partial sums over the
// group (Parameter::grad_sum_group). A partitioned module's split is fixed by
// the module (Megatron: qkv and fc1 column-parallel, proj and fc2
// row-parallel), so a plan only says *whether* a module is partitioned.
//
// A plan is an ordered list of rules "glob pattern = tensor | replicate".
// Modules ask it at construction with their full name ("is h.3.mlp
// partitioned?"); the first rule whose pattern matches the name, or the name
// of a module enclosing it ("h.*" covers h.3.mlp.fc1), decides; with no
// matching rule a module is partitioned. In a pattern `*` matches any run of
// characters (dots included) and `?` any one character. Modules whose parts
// must be partitioned together (attention: qkv and proj; MLP: fc1 and fc2)
// ask for each part, so a rule may name the module or its parts, and a plan
// that splits such a pair is an error.
//
// Groups are construction-time (modules take them from the ParallelContext
// they are built on), so "setting" a TP group on a built model means building
// the same tree on a context with the group and moving the parameters over:
// set_tensor_parallel_group does exactly that for any module built from a
// context and a config, which lets a user build (or load) a model at TP=1 and
// re-shard it.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "weft/comm/process_group.h"
#include "weft/nn/module.h"
#include "weft/parallel/context.h"

namespace weft::nn {

enum class Partition { tensor, replicate };

const char* partition_name(Partition p);  // "tensor", "replicate"
// "tensor" (or "tp"), "replicate" (or "none"); anything else is an error.
Partition parse_partition(const std::string& s);

// Shell-style match of the whole name: `*` any run of characters, `?` one.
bool glob_match(std::string_view pattern, std::string_view name);

struct PartitionRule {
  std::string pattern{};
  Partition partition = Partition::tensor;
};

class PartitionPlan {
 public:
  PartitionPlan() = default;

  // Appends a rule (later rules only decide names no earlier rule matches).
  PartitionPlan& add(std::string pattern, Partition partition);
  // "h.*.attn=replicate,h.0.mlp=tensor" (rules in order; empty: no rules).
  static PartitionPlan parse(const std::string& text);

  // The first rule matching `module` or an enclosing name decides; tensor
  // when none does.
  Partition lookup(const std::string& module) const;
  bool partitioned(const std::string& module) const { return lookup(module) == Partition::tensor; }
  // The partition of `module` whose `parts` ("qkv", "proj") must all be
  // partitioned alike; an error names the parts when the plan splits them.
  Partition lookup_together(const std::string& module,
                            std::initializer_list<const char*> parts) const;

  const std::vector<PartitionRule>& rules() const { return rules_; }
  std::string str() const;  // the parse() form

 private:
  std::vector<PartitionRule> rules_;
};

// Copies the parameters of `full` (a tree whose parameters are whole: built
// without a TP group, or split at the TP level as `sharded`'s are) into
// `sharded` (the same tree built with the groups), each rank keeping the
// slice its ShardSpec describes. Names and global shapes must match.
// Gradients of `sharded` are zeroed.
void load_full_parameters(Module& sharded, Module& full);

// Replaces `module` (built without a TP group, or with a group of one rank,
// or with the same TP group) by the same module built on `context` (its
// groups), holding the slices of its current parameters: call it before
// training starts (gradients start at zero). M needs `const Config&
// config() const` and a constructor from a context and that config (every
// module in nn/ has both).
template <typename M>
void set_tensor_parallel_group(std::unique_ptr<M>& module, parallel::ContextPtr context) {
  auto sharded = std::make_unique<M>(std::move(context), module->config());
  load_full_parameters(*sharded, *module);
  module = std::move(sharded);
}

}  // namespace weft::nn
