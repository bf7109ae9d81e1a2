#include "bench/session/stop_signal.hpp"

#include <csignal>

namespace cclbench {
namespace {

std::atomic<int> g_stop_signal{0};  // written by the signal handler only (async-signal-safe)

extern "C" void on_stop_signal(int signal_number) {
  if (g_stop_signal.exchange(signal_number) != 0) {
    // Second signal: the user insists. Completed records are already on disk.
    std::signal(signal_number, SIG_DFL);
    std::raise(signal_number);
  }
}

}  // namespace

void install_stop_signal_handlers() {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
}

const std::atomic<int>& stop_signal() { return g_stop_signal; }

}  // namespace cclbench
