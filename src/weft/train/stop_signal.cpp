#include "weft/train/stop_signal.h"

#include <unistd.h>

#include <atomic>
#include <cstring>

namespace weft::train {

namespace {

std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the handler needs a lock-free flag");

void write_stderr(const char* text) {
  // Nothing to do when stderr is gone; the flag is what matters.
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, text, std::strlen(text));
}

extern "C" void on_stop_signal(int sig) {
  int none = 0;
  if (g_signal.compare_exchange_strong(none, sig)) {
    write_stderr(
        "\nweft: stopping after this step, with a checkpoint if --save is set (interrupt again "
        "to stop at once)\n");
    return;
  }
  write_stderr("\nweft: stopped at once; the last complete checkpoint is kept\n");
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

StopSignals::StopSignals() {
  g_signal.store(0);
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  // A SIGINT ignored from the start (a background job of a script, nohup)
  // stays ignored, as POSIX programs leave it.
  ::sigaction(SIGINT, nullptr, &previous_int_);
  if (previous_int_.sa_handler != SIG_IGN) ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, &previous_term_);
}

StopSignals::~StopSignals() {
  ::sigaction(SIGINT, &previous_int_, nullptr);
  ::sigaction(SIGTERM, &previous_term_, nullptr);
}

int StopSignals::pending() { return g_signal.load(); }

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    default: return "a signal";
  }
}

}  // namespace weft::train
