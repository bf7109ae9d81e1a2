#pragma once
// SIGINT/SIGTERM: the first asks the runner to stop between cases (completed records are already
// on disk); a second one ends the process at once.
#include <atomic>

namespace cclbench {

void install_stop_signal_handlers();
// The first signal received, 0 before any.
const std::atomic<int>& stop_signal();

}  // namespace cclbench
