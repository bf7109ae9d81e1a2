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

// The start-up's bound from a command line (read before the config parser, which reports bad values;
// this only decides how to guard the start): the -T/--timeout value (the last one given; 0 when absent
// or unreadable), or with --learn-deadlines the start-up allowance at the launch's rank count (from
// the launcher's environment: OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS), capped by -T.
double startup_timeout_seconds(int argc, char** argv);
// Whether a command line has `flag` (exactly) among its arguments.
bool command_line_has(int argc, char** argv, const char* flag);
// The launch's rank count as the launcher tells it, 1 when it does not.
int launch_size_from_environment();

class StartupGuard {
 public:
  // 0: no guard. `basis` says where the bound came from, for the message ("-T", "the start-up allowance").
  StartupGuard(double timeout_seconds, std::string program, std::string basis = "-T");
  ~StartupGuard();  // disarms
  StartupGuard(const StartupGuard&) = delete;
  StartupGuard& operator=(const StartupGuard&) = delete;
  void mpi_ready(const MpiContext& context);  // from now on a timeout aborts every rank through MPI
  void disarm();                               // the first case starts: the watchdog takes over
  double remaining_seconds() const;            // until the guard fires (0 when it has no bound)

 private:
  void watch();
  std::chrono::duration<double> timeout_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::string program_;
  std::string basis_;
  const MpiContext* context_ = nullptr;
  bool armed_ = true;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::thread thread_;
};

}  // namespace cclbench
