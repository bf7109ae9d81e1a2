#include "bench/core/watchdog.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "bench/core/errors.hpp"
#include "bench/core/units.hpp"

namespace cclbench {
namespace {

std::string shortest_seconds_text(double seconds) {
  std::ostringstream text;
  text << seconds;  // the shortest form: 0.2, 45.5, 867
  return text.str();
}

double rounded(double seconds) { return static_cast<double>(static_cast<long long>(seconds * 1000 + 0.5)) / 1000; }

}  // namespace

Watchdog::Watchdog(const MpiContext& context, WatchdogOptions options, std::function<void(const std::string&)> on_timeout)
    : context_(context), options_(options), on_timeout_(std::move(on_timeout)) {
  if (options_.learned) model_.emplace(*options_.learned);
  if (options_.fixed_timeout_s > 0 || model_) thread_ = std::thread([this] { watch(); });
}

Watchdog::Watchdog(const MpiContext& context, double timeout_seconds, std::function<void(const std::string&)> on_timeout)
    : Watchdog(context, WatchdogOptions{timeout_seconds, std::nullopt, nullptr}, std::move(on_timeout)) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Deadline Watchdog::deadline_for(const Watched& entry) const {
  if (model_) return model_->deadline(entry.spec, entry.phase);
  Deadline fixed;
  fixed.seconds = options_.fixed_timeout_s;
  fixed.basis = "-T";
  return fixed;
}

void Watchdog::arm(Watched& entry) {
  entry.started = std::chrono::steady_clock::now();
  entry.deadline = deadline_for(entry);
  deadline_ = entry.started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                  std::chrono::duration<double>(entry.deadline.seconds));
}

void Watchdog::report(const char* event, const Watched& entry, std::optional<double> elapsed_s) const {
  if (options_.progress == nullptr) return;
  nlohmann::json fields = {{"event", event},
                           {"phase", phase_name(entry.phase)},
                           {"case", entry.spec.case_id()},
                           {"collective", std::string(name_of(entry.spec.collective))},
                           {"bytes", entry.spec.counts.size_bytes()}};
  fields["deadline_s"] = rounded(entry.deadline.seconds);
  if (elapsed_s) fields["elapsed_s"] = rounded(*elapsed_s);
  if (entry.deadline.predicted_s) fields["predicted_s"] = rounded(*entry.deadline.predicted_s);
  options_.progress->emit(std::move(fields));
}

void Watchdog::enter(const CaseSpec& spec, Phase phase) {
  if (!thread_.joinable() && options_.progress == nullptr) return;
  Watched entry;
  std::ostringstream what;
  what << "case " << spec.case_id() << " (size " << spec.counts.size_bytes() << " B, " << phase_name(phase) << ") on rank "
       << context_.world_rank << " (" << context_.hostname << ")";
  entry.what = what.str();
  entry.spec = spec;
  entry.phase = phase;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (model_) entry.smaller = model_->history(spec, phase);
    arm(entry);
    watched_.push_back(entry);
    report("enter", entry, std::nullopt);
  }
  changed_.notify_all();
}

void Watchdog::leave() {
  if (!thread_.joinable() && options_.progress == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (watched_.empty()) return;
    const Watched done = watched_.back();
    watched_.pop_back();
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - done.started).count();
    if (model_) model_->record(done.spec, done.phase, elapsed);
    if (!watched_.empty()) {
      arm(watched_.back());  // the enclosing phase goes on: a fresh deadline for it
      Watched reported = done;
      reported.deadline = watched_.back().deadline;  // what is watched from now on
      report("leave", reported, elapsed);
    } else if (options_.progress != nullptr) {
      options_.progress->emit({{"event", "leave"}, {"phase", phase_name(done.phase)}, {"case", done.spec.case_id()},
                               {"elapsed_s", rounded(elapsed)}, {"deadline_s", nullptr}});
    }
  }
  changed_.notify_all();
}

double abort_delay_seconds(int world_rank, int world_size, double timeout_seconds) {
  if (world_rank == 0 || world_size < 2) return 0.0;
  return std::min(timeout_seconds, kWriterGraceSeconds);
}

std::string Watchdog::timeout_message(const Watched& entry) const {
  const double ran = std::chrono::duration<double>(std::chrono::steady_clock::now() - entry.started).count();
  std::ostringstream message;
  message << "timeout: " << entry.what << " did not finish within " << shortest_seconds_text(entry.deadline.seconds) << " s";
  if (!model_) {
    message << " (-T)";
  } else {
    char ran_text[32];
    std::snprintf(ran_text, sizeof(ran_text), "%.1f", ran);
    message << " (learned deadline: " << entry.deadline.basis << "); it ran " << ran_text << " s";
    if (entry.deadline.predicted_s && *entry.deadline.predicted_s > 0) {
      char times[32];
      std::snprintf(times, sizeof(times), "%.0f", ran / *entry.deadline.predicted_s);
      message << ", over " << times << "x what its smaller sizes predicted";
    }
    if (!entry.smaller.empty()) message << "; the same collective's " << phase_name(entry.phase) << " took " << entry.smaller;
  }
  message << "; aborting every rank";
  return message.str();
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
      const Watched expired = watched_.back();
      const std::string text = timeout_message(expired);
      if (options_.progress != nullptr) {
        options_.progress->emit({{"event", "timeout"}, {"phase", phase_name(expired.phase)},
                                 {"case", expired.spec.case_id()},
                                 {"deadline_s", rounded(expired.deadline.seconds)}});
      }
      lock.unlock();
      on_timeout_(text);
      // Rank 0 writes -J. A stall anywhere holds rank 0 in the same collective, so its own watchdog
      // fires within about this window and records status "timeout" before it aborts every rank;
      // the other ranks wait that long before aborting, so their abort cannot cut the write short.
      const double delay = abort_delay_seconds(context_.world_rank, context_.world_size, expired.deadline.seconds);
      if (delay > 0) std::this_thread::sleep_for(std::chrono::duration<double>(delay));
      abort_all_ranks(context_, to_int(ExitCode::timeout));
    }
  }
}

}  // namespace cclbench
