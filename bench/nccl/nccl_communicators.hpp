#pragma once
// The NCCL backend's owner of its communicators (internal to bench/nccl): destroy or abort, and
// the lock that lets the -T watchdog thread abort them while the main thread may be inside NCCL.
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cclbench::nccl_detail {

// Owns the communicators: destroyed normally, or aborted after an error (a destroy could wait
// for peers that will never come).
//
// Thread safety. The main thread makes every NCCL call on these communicators while holding
// `use_` (see Use). The watchdog thread may call abort_from_any_thread() at any time: it takes
// `use_` (waiting at most kAbortLockWait for an NCCL call of the main thread to return), marks the
// communicators aborted and calls ncclCommAbort on each, so no communicator is freed while the main
// thread is inside NCCL. If the main thread stays inside a blocking NCCL call (a connection waiting
// for a stalled peer), ncclCommAbort is skipped: the caller's MPI_Abort ends the process, and the
// main thread never touches the communicators again (Use sees the mark).
class Communicators {
 public:
  enum class State { live, aborted_here, aborted_elsewhere };

  Communicators() = default;
  Communicators(const Communicators&) = delete;
  Communicators& operator=(const Communicators&) = delete;
  ~Communicators() {
    if (stopping()) return;
    if (std::uncaught_exceptions() > 0) {
      abort_all();
      return;
    }
    for (ncclComm_t comm : comms_) {
      if (comm != nullptr) ncclCommDestroy(comm);
    }
  }
  std::vector<ncclComm_t>& handles() { return comms_; }
  const std::vector<ncclComm_t>& handles() const { return comms_; }
  State state() const { return state_.load(); }

  // The main thread's licence to call NCCL: holds the lock, and tells whether the communicators
  // are still usable.
  class Use {
   public:
    explicit Use(Communicators& owner) : lock_(owner.use_, std::defer_lock) {
      // Once an abort is requested the main thread stops taking the lock, so the aborting thread
      // gets it at the next release (std::timed_mutex promises no fairness).
      if (owner.abort_requested_.load()) return;
      lock_.lock();
      live_ = owner.state_.load() == State::live;
    }
    bool live() const { return live_; }

   private:
    std::unique_lock<std::timed_mutex> lock_;
    bool live_ = false;
  };

  // True once the communicators are aborted or an abort from another thread is under way: the
  // main thread makes no further NCCL call.
  bool stopping() const { return abort_requested_.load() || state_.load() != State::live; }

  // On the thread that makes the NCCL calls, after an error it detected itself.
  void abort_all() noexcept {
    State expected = State::live;
    if (!state_.compare_exchange_strong(expected, State::aborted_here)) return;
    for (ncclComm_t comm : comms_) {
      if (comm != nullptr) ncclCommAbort(comm);
    }
  }

  // From the -T watchdog thread, or from the main thread when it holds no Use. Returns a note
  // when ncclCommAbort could not run or did not return in time; empty otherwise.
  std::string abort_from_any_thread() noexcept {
    abort_requested_.store(true);
    std::unique_lock<std::timed_mutex> lock(use_, std::defer_lock);
    const bool locked = lock.try_lock_for(kAbortLockWait);
    State expected = State::live;
    if (!state_.compare_exchange_strong(expected, State::aborted_elsewhere)) return {};  // already aborted
    if (!locked) return "the main thread is blocked inside an NCCL call; ncclCommAbort skipped, MPI_Abort ends the process";
    // ncclCommAbort normally returns quickly (kernels poll its abort flag); it must not keep the
    // watchdog from calling MPI_Abort if it does not.
    try {
      auto done = std::make_shared<std::atomic<bool>>(false);
      std::thread([comms = comms_, done] {
        for (ncclComm_t comm : comms) {
          if (comm != nullptr) ncclCommAbort(comm);
        }
        done->store(true);
      }).detach();
      const auto give_up = std::chrono::steady_clock::now() + kAbortReturnWait;
      while (!done->load() && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      if (!done->load()) return "ncclCommAbort did not return within 10 s; MPI_Abort ends the process";
    } catch (const std::exception& error) {
      return std::string("could not start ncclCommAbort: ") + error.what();
    }
    return {};
  }

 private:
  static constexpr std::chrono::seconds kAbortLockWait{2};
  static constexpr std::chrono::seconds kAbortReturnWait{10};
  std::vector<ncclComm_t> comms_;
  std::timed_mutex use_;
  std::atomic<State> state_{State::live};
  std::atomic<bool> abort_requested_{false};
};

}  // namespace cclbench::nccl_detail
