#include "weft/parallel/context.h"

namespace weft::parallel {

const char* sequence_parallel_name(SequenceParallel sp) {
  switch (sp) {
    case SequenceParallel::off: return "off";
    case SequenceParallel::seq: return "seq";
    case SequenceParallel::batch: return "batch";
  }
  return "?";
}

SequenceParallel parse_sequence_parallel(const std::string& s) {
  if (s == "off") return SequenceParallel::off;
  if (s == "seq") return SequenceParallel::seq;
  if (s == "batch") return SequenceParallel::batch;
  WEFT_FAIL("unknown sequence parallelism '{}': use off, seq or batch", s);
}

ContextPtr make_context(std::shared_ptr<comm::ProcessGroup> tp, SequenceParallel sp,
                        Precision precision, uint64_t seed) {
  auto c = std::make_shared<ParallelContext>();
  c->tp = std::move(tp);
  c->sp = sp;
  c->precision = precision;
  c->seed = seed;
  return c;
}

}  // namespace weft::parallel
