// ParallelContext: everything about how a model runs that is not its shape.
//
// One object per model and rank, shared by every module (std::shared_ptr<const
// ParallelContext>): the process groups (tp, gtp for generalized tensor
// parallelism, ep for expert parallelism, cp for context parallelism, dp for data parallelism), the
// sequence-parallel mode, the precision recipe, the execution context kernels run on and the seed
// every parameter's initialization derives from. Module configs hold only their name, shape and
// initialization; nothing else carries these options.
//
// Residual-stream layout. Activations between tensor-parallel regions are
// row blocks (tokens x C), 3-D with the token order chosen by the SP mode so
// that a rank's SP shard is one contiguous block of rows along dimension 0:
//   off, batch  batch-major     (B, T, C); batch SP splits B
//   seq         sequence-major  (T, B, C) as Megatron's [s, b, h]; SP splits T
// token_layout() says which; attention reads its heads through strides.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "weft/comm/process_group.h"
#include "weft/core/exec_context.h"
#include "weft/parallel/context/chunks.h"
#include "weft/parallel/context/options.h"
#include "weft/parallel/overlap/config.h"
#include "weft/parallel/precision.h"
#include "weft/parallel/scaling.h"
#include "weft/parallel/workspace.h"

namespace weft::parallel {

namespace gtp {
struct Runtime;
}

enum class SequenceParallel : uint8_t { off, seq, batch };
const char* sequence_parallel_name(SequenceParallel sp);
// "off", "seq", "batch"; throws weft::Error naming the choices otherwise.
SequenceParallel parse_sequence_parallel(const std::string& s);

// The order of the tokens of a (B, T) batch in a residual-stream activation.
enum class TokenLayout : uint8_t { batch_major, sequence_major };

struct ParallelContext {
  std::shared_ptr<comm::ProcessGroup> tp{};   // null: no tensor parallelism
  std::shared_ptr<comm::ProcessGroup> gtp{};  // generalized TP: weights sharded 1/N over it
  // Expert parallelism: MoE layers' experts split over it, tokens exchanged
  // by all_to_all; its ranks see different data. null: no expert parallelism.
  std::shared_ptr<comm::ProcessGroup> ep{};
  std::shared_ptr<comm::ProcessGroup> dp{};  // data parallelism (gradient sync); may be null
  // Context parallelism: every sequence split over it in 2N chunks
  // (parallel/context/); null or one rank: none.
  std::shared_ptr<comm::ProcessGroup> cp{};
  context::CpComm cp_comm = context::CpComm::p2p;
  // The time context-parallel attention took and waited (bench step reads it).
  std::shared_ptr<context::AttentionTimes> cp_times = std::make_shared<context::AttentionTimes>();
  SequenceParallel sp = SequenceParallel::off;
  Precision precision{};
  ExecContext exec{};
  uint64_t seed = 1337;
  // Which comm-GEMM overlap each GEMM of a layer uses (off by default).
  OverlapConfig overlap{};
  // Native quantized GEMMs or the dequantized emulation (precision.h).
  QuantizedGemm quantized_gemm = QuantizedGemm::automatic;
  // The rank's scratch buffers, shared by every module on this context.
  std::shared_ptr<Workspace> workspace = std::make_shared<Workspace>();
  // The scaling state of the quantized recipes (amax histories, the step
  // counter of their random streams), shared by every module on this context.
  std::shared_ptr<ScalingRegistry> scaling = std::make_shared<ScalingRegistry>();
  // Generalized tensor parallelism's state (options, prefetch chain, weight
  // cache; gtp/runtime.h): set with a gtp group of several ranks by
  // gtp::enable, null otherwise.
  std::shared_ptr<gtp::Runtime> gtp_runtime{};

  int tp_size() const { return tp ? tp->size() : 1; }
  int tp_rank() const { return tp ? tp->rank() : 0; }
  // The TP group when it has more than one rank, else null (no communication).
  comm::ProcessGroup* tp_group() const { return tp_size() > 1 ? tp.get() : nullptr; }
  int cp_size() const { return cp ? cp->size() : 1; }
  int cp_rank() const { return cp ? cp->rank() : 0; }
  // This rank's chunks of a sequence of `seq` positions (all of it without CP).
  context::SequenceChunks cp_chunks(int64_t seq) const { return {seq, cp_size(), cp_rank()}; }
  int ep_size() const { return ep ? ep->size() : 1; }
  int ep_rank() const { return ep ? ep->rank() : 0; }
  bool sequence_parallel() const { return sp != SequenceParallel::off; }
  TokenLayout token_layout() const {
    return sp == SequenceParallel::seq ? TokenLayout::sequence_major : TokenLayout::batch_major;
  }
  // The dtype activations are computed in.
  DType compute() const { return precision.activation(); }
};

using ContextPtr = std::shared_ptr<const ParallelContext>;

// A context with the given options (tests, tools): make_context() is a single
// rank, f32, no SP.
ContextPtr make_context(std::shared_ptr<comm::ProcessGroup> tp = nullptr,
                        SequenceParallel sp = SequenceParallel::off, Precision precision = {},
                        uint64_t seed = 1337);

}  // namespace weft::parallel
