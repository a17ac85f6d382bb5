#include "weft/nn/partition.h"

namespace weft::nn {

const char* partition_name(Partition p) { return p == Partition::tensor ? "tensor" : "replicate"; }

Partition parse_partition(const std::string& s) {
  if (s == "tensor" || s == "tp") return Partition::tensor;
  if (s == "replicate" || s == "none") return Partition::replicate;
  WEFT_CHECK(s != "column" && s != "row",
             "partition '{}': a module's split is fixed (qkv and fc1 column-parallel, proj and "
             "fc2 row-parallel); a plan only says whether it is partitioned: use tensor or "
             "replicate",
             s);
  WEFT_FAIL("unknown partition '{}': use tensor (partition the module) or replicate", s);
}

bool glob_match(std::string_view pattern, std::string_view name) {
  // Iterative matching with backtracking to the last `*` only: linear in
  // practice and never exponential.
  size_t p = 0, n = 0, star = std::string_view::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p;
      ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

PartitionPlan& PartitionPlan::add(std::string pattern, Partition partition) {
  WEFT_CHECK(!pattern.empty(), "partition plan: a rule needs a non-empty name pattern");
  rules_.push_back({std::move(pattern), partition});
  return *this;
}

PartitionPlan PartitionPlan::parse(const std::string& text) {
  PartitionPlan plan;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string rule = text.substr(start, end - start);
    if (!rule.empty()) {
      size_t eq = rule.find('=');
      WEFT_CHECK(eq != std::string::npos && eq > 0,
                 "partition plan rule '{}' must look like pattern=tensor or pattern=replicate "
                 "(e.g. h.*.mlp=replicate)",
                 rule);
      plan.add(rule.substr(0, eq), parse_partition(rule.substr(eq + 1)));
    }
    start = end + 1;
  }
  return plan;
}

Partition PartitionPlan::lookup(const std::string& module) const {
  for (const PartitionRule& rule : rules_) {
    // The name itself, then each enclosing name (h.3.mlp.fc1, h.3.mlp, h.3, h).
    std::string_view name = module;
    while (true) {
      if (glob_match(rule.pattern, name)) return rule.partition;
      size_t dot = name.rfind('.');
      if (dot == std::string_view::npos) break;
      name = name.substr(0, dot);
    }
  }
  return Partition::tensor;
}

Partition PartitionPlan::lookup_together(const std::string& module,
                                         std::initializer_list<const char*> parts) const {
  if (parts.size() == 0) return lookup(module);
  const std::string first_name = module + "." + *parts.begin();
  const Partition first = lookup(first_name);
  for (const char* part : parts) {
    const std::string name = module + "." + part;
    const Partition p = lookup(name);
    WEFT_CHECK(p == first,
               "partition plan '{}' makes {} {} but {} {}: the parts of {} must be partitioned "
               "together (write a rule for {} itself)",
               str(), first_name, partition_name(first), name, partition_name(p), module, module);
  }
  return first;
}

std::string PartitionPlan::str() const {
  std::string out;
  for (const PartitionRule& rule : rules_) {
    if (!out.empty()) out += ',';
    out += rule.pattern + "=" + partition_name(rule.partition);
  }
  return out;
}

void load_full_parameters(Module& sharded, Module& full) {
  std::vector<Parameter*> dst = sharded.parameters(), src = full.parameters();
  WEFT_CHECK(dst.size() == src.size(),
             "cannot re-shard: the source module has {} parameters, the target {}", src.size(),
             dst.size());
  for (size_t i = 0; i < dst.size(); ++i) {
    Parameter& d = *dst[i];
    const Parameter& s = *src[i];
    WEFT_CHECK(d.name == s.name, "cannot re-shard: parameter {} of the source is {} in the target",
               s.name, d.name);
    WEFT_CHECK(s.spec.global_shape == d.spec.global_shape,
               "cannot re-shard {}: the source has global shape {}, the target's is {}", s.name,
               s.spec.global_shape, d.spec.global_shape);
    WEFT_CHECK(!s.spec.rows_split(), "cannot re-shard {}: its source's rows are split over '{}'",
               s.name, s.spec.row_group);
    WEFT_CHECK(!s.spec.is_shared() && !d.spec.is_shared(),
               "cannot re-shard {}: its slice is shared by several TP ranks (replicated key/value "
               "heads)",
               s.name);
    if (s.spec.is_split()) {
      // Split at the TP level already: only the rows may be split further.
      const ShardSpec t = d.spec.tp_level();
      WEFT_CHECK(t.split_dim == s.spec.split_dim && t.split_group == s.spec.split_group &&
                     t.blocks == s.spec.blocks && t.offset == s.spec.offset &&
                     t.length == s.spec.length,
                 "cannot re-shard {}: its source is split over '{}' unlike the target; re-shard a "
                 "module built without a tensor-parallel group",
                 s.name, s.spec.split_group);
      d.value.copy_from(parallel::row_shard_of(d.spec, s.value));
    } else {
      d.value.copy_from(shard_of(d.spec, s.value));
    }
    d.grad.zero();
  }
}

}  // namespace weft::nn
