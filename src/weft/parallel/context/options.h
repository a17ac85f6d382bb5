// Context parallelism's options: how attention exchanges keys and values
// (parallel/context/attention.h) and the times it reports.
#pragma once

#include <cstdint>
#include <string>

namespace weft::parallel::context {

enum class CpComm : uint8_t { p2p, allgather, a2a };
const char* cp_comm_name(CpComm c);  // "p2p", "allgather", "a2a"
// Throws weft::Error naming the choices for another string.
CpComm parse_cp_comm(const std::string& s);

// Checks that `comm` can split `heads` query and `kv_heads` key/value heads
// (per TP rank) over `size` ranks; the message names --cp-comm and --cp.
void check_heads(CpComm comm, int size, int64_t heads, int64_t kv_heads);

// Time spent in context-parallel attention, accumulated over calls: all of
// it (forward and backward) and the part spent waiting for the exchange.
struct AttentionTimes {
  double attention_s = 0;
  double wait_s = 0;
};

}  // namespace weft::parallel::context
