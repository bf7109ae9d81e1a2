#pragma once
// Bounds coll_perf's start-up with the same -T seconds as the watchdog: MPI_Init, the startup and
// case agreements, the backend's initialisation (NCCL's communicator, the MPI backend's first TCP
// connections). The -T watchdog watches cases only, so a peer frozen there (SIGSTOP), or a rail the
// TCP transport keeps retrying, held every rank until the launcher's own, much longer bound.
// When it fires it names the host and what was starting, then ends every rank: MPI_Abort once MPI is
// up, else _Exit (the launcher ends the others when a process exits before MPI_Init returns).
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "bench/core/mpi_context.hpp"

namespace cclbench {

// The -T/--timeout value among a command line's arguments (the last one given), 0 when absent or
// unreadable: the config parser reports bad values; this only decides whether to guard the start.
double startup_timeout_seconds(int argc, char** argv);

class StartupGuard {
 public:
  StartupGuard(double timeout_seconds, std::string program);  // 0: no guard
  ~StartupGuard();  // disarms
  StartupGuard(const StartupGuard&) = delete;
  StartupGuard& operator=(const StartupGuard&) = delete;
  void mpi_ready(const MpiContext& context);  // from now on a timeout aborts every rank through MPI
  void disarm();                               // the first case starts: the watchdog takes over

 private:
  void watch();
  std::chrono::duration<double> timeout_;
  std::string program_;
  const MpiContext* context_ = nullptr;
  bool armed_ = true;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::thread thread_;
};

}  // namespace cclbench
