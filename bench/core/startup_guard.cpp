#include "bench/core/startup_guard.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "bench/core/errors.hpp"

namespace cclbench {

double startup_timeout_seconds(int argc, char** argv) {
  double seconds = 0.0;
  for (int index = 1; index + 1 < argc; ++index) {
    const std::string flag = argv[index];
    if (flag != "-T" && flag != "--timeout") continue;
    char* end = nullptr;
    const double value = std::strtod(argv[index + 1], &end);
    seconds = (end != argv[index + 1] && *end == '\0' && value > 0 && value <= 86400) ? value : 0.0;
  }
  return seconds;
}

StartupGuard::StartupGuard(double timeout_seconds, std::string program)
    : timeout_(timeout_seconds), program_(std::move(program)) {
  if (timeout_seconds > 0) thread_ = std::thread([this] { watch(); });
}

StartupGuard::~StartupGuard() {
  disarm();
  if (thread_.joinable()) thread_.join();
}

void StartupGuard::mpi_ready(const MpiContext& context) {
  std::lock_guard<std::mutex> lock(mutex_);
  context_ = &context;
}

void StartupGuard::disarm() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = false;
  }
  changed_.notify_all();
}

void StartupGuard::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout_);
  if (changed_.wait_until(lock, deadline, [this] { return !armed_; })) return;
  char host[256] = "?";
  gethostname(host, sizeof(host) - 1);
  std::ostringstream message;
  message << program_ << ": timeout: start-up (MPI wire-up, backend initialisation, case agreement) did not finish within "
          << timeout_.count() << " s (-T) on " << (context_ ? "rank " + std::to_string(context_->world_rank) + " " : "")
          << "(" << host << "); aborting every rank\n";
  const std::string text = message.str();
  std::fwrite(text.data(), 1, text.size(), stderr);  // one write: ranks share stderr
  std::fflush(stderr);
  const int code = to_int(ExitCode::timeout);
  if (context_ != nullptr) abort_all_ranks(*context_, code);
  std::_Exit(code);
}

}  // namespace cclbench
