// StopSignals: SIGINT and SIGTERM ask a training run to stop after its
// current step instead of killing it.
//
// While a StopSignals lives, the first SIGINT or SIGTERM only records its
// number (the handler stores it in a lock-free atomic and writes one line to
// stderr, both async-signal-safe); the run loop reads pending() between
// steps, agrees on it with the other ranks, writes a checkpoint and ends. A
// second signal restores the default action and raises it again: the process
// dies at once, as it would have without weft's handler (a checkpoint being
// written then stays in its temporary directory, and the previous one is
// kept). A SIGINT that was ignored when the run started (a background job
// of a script) stays ignored. Destruction restores the handlers that were
// there before.
#pragma once

#include <csignal>

namespace weft::train {

class StopSignals {
 public:
  // Clears any signal recorded before and installs the handlers.
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The signal received (SIGINT, SIGTERM), 0 while none.
  static int pending();

 private:
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
};

// "SIGINT", "SIGTERM", else "a signal".
const char* signal_name(int sig);

}  // namespace weft::train
