#include "bench/core/watchdog.hpp"

#include <algorithm>
#include <sstream>

#include "bench/core/errors.hpp"
#include "bench/core/units.hpp"

namespace cclbench {

Watchdog::Watchdog(const MpiContext& context, double timeout_seconds, std::function<void(const std::string&)> on_timeout)
    : context_(context), timeout_(timeout_seconds), on_timeout_(std::move(on_timeout)) {
  if (timeout_seconds > 0) thread_ = std::thread([this] { watch(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::enter(const CaseSpec& spec, const char* phase) {
  if (!thread_.joinable()) return;
  std::ostringstream what;
  what << "case " << spec.case_id() << " (size " << spec.counts.size_bytes() << " B, " << phase << ") on rank "
       << context_.world_rank << " (" << context_.hostname << ")";
  {
    std::lock_guard<std::mutex> lock(mutex_);
    watched_.push_back(what.str());
    arm_innermost();
  }
  changed_.notify_all();
}

void Watchdog::arm_innermost() {
  deadline_ = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout_);
}

void Watchdog::leave() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!watched_.empty()) watched_.pop_back();
    if (!watched_.empty()) arm_innermost();  // the enclosing phase goes on: a fresh deadline for it
  }
  changed_.notify_all();
}

double abort_delay_seconds(int world_rank, int world_size, double timeout_seconds) {
  if (world_rank == 0 || world_size < 2) return 0.0;
  return std::min(timeout_seconds, kWriterGraceSeconds);
}

void Watchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (watched_.empty()) {
      changed_.wait(lock);
      continue;
    }
    if (changed_.wait_until(lock, deadline_) == std::cv_status::timeout && !watched_.empty() && !stopping_ &&
        std::chrono::steady_clock::now() >= deadline_) {
      std::ostringstream message;
      message << "timeout: " << watched_.back() << " did not finish within " << timeout_.count() << " s (-T); aborting every rank";
      const std::string text = message.str();
      lock.unlock();
      on_timeout_(text);
      // Rank 0 writes -J. A stall anywhere holds rank 0 in the same collective, so its own watchdog
      // fires within about this window and records status "timeout" before it aborts every rank;
      // the other ranks wait that long before aborting, so their abort cannot cut the write short.
      const double delay = abort_delay_seconds(context_.world_rank, context_.world_size, timeout_.count());
      if (delay > 0) std::this_thread::sleep_for(std::chrono::duration<double>(delay));
      abort_all_ranks(context_, to_int(ExitCode::timeout));
    }
  }
}

}  // namespace cclbench
