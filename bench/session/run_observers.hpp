#pragma once
// What coll_perf does around every case: the test stall hook, rail counters and --tuning-from.
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench/core/config.hpp"
#include "bench/core/errors.hpp"
#include "bench/core/mpi_context.hpp"
#include "bench/core/runner.hpp"
#include "bench/core/units.hpp"
#include "bench/evidence/rail_observer.hpp"
#include "bench/evidence/tuning_run.hpp"

namespace cclbench {

// Test-only fault hook: CCLBENCH_TEST_STALL=<rank>:<case> makes that rank (of the launch, MPI_COMM_WORLD,
// also under --split-ranks) hang inside the watched
// phase of that case (<case>: its index in the run, or its case_id such as all_reduce.float.sum.out.64M),
// so tests can prove that the watchdog ends every rank. CCLBENCH_TEST_STALL=<rank>:<case>:frozen
// instead stops that rank (SIGSTOP, its watchdog thread included) right after the case, before its
// results are exchanged: the other ranks must then be ended by their own watchdogs while they wait on
// it between phases. It is read once, only by coll_perf, and does nothing unless set; when it fires
// it says so on stderr (the fault matrix checks that it did).
class TestStallHook final : public CaseObserver {
 public:
  TestStallHook(const MpiContext& context, PhaseMonitor& monitor) : context_(context), monitor_(monitor) {
    const char* value = std::getenv("CCLBENCH_TEST_STALL");
    if (value == nullptr) return;
    const std::string text = value;
    const auto colon = text.find(':');
    if (colon == std::string::npos) throw UsageError("CCLBENCH_TEST_STALL: expected <rank>:<case index or case_id>");
    stall_rank_ = static_cast<int>(parse_integer(text.substr(0, colon), "CCLBENCH_TEST_STALL rank", 0, 1 << 20));
    std::string rest = text.substr(colon + 1);
    const std::string frozen = ":frozen";
    if (rest.size() > frozen.size() && rest.compare(rest.size() - frozen.size(), frozen.size(), frozen) == 0) {
      freeze_ = true;
      rest.resize(rest.size() - frozen.size());
    }
    if (!rest.empty() && rest.find_first_not_of("0123456789") == std::string::npos) {
      stall_case_ = static_cast<int>(parse_integer(rest, "CCLBENCH_TEST_STALL case", 0, 1 << 20));
    } else if (!rest.empty()) {
      stall_case_id_ = rest;
    } else {
      throw UsageError("CCLBENCH_TEST_STALL: expected <rank>:<case index or case_id>");
    }
  }
  void before_case(const CaseSpec& spec) override {
    current_is_target_ = stall_rank_ == context_.job_rank &&
                         (stall_case_id_.empty() ? case_index_ == stall_case_ : spec.case_id() == stall_case_id_);
    ++case_index_;
    if (!freeze_ && current_is_target_) {
      std::cerr << ("coll_perf: test stall (CCLBENCH_TEST_STALL): rank " + std::to_string(context_.job_rank) + " (" +
                    context_.hostname + ") sleeps in case " + spec.case_id() + "\n")
                << std::flush;
      monitor_.enter(spec, Phase::stall);
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  }
  void after_case(CaseResult&) override {
    if (freeze_ && current_is_target_) std::raise(SIGSTOP);
  }

 private:
  const MpiContext& context_;
  PhaseMonitor& monitor_;
  int stall_rank_ = -1;
  int stall_case_ = -1;
  std::string stall_case_id_;
  int case_index_ = 0;
  bool current_is_target_ = false;
  bool freeze_ = false;
};

// The observers in their order: the stall hook, rail counters, then --tuning-from.
class CollPerfObservers final : public CaseObserver {
 public:
  CollPerfObservers(const Config& config, const MpiContext& context, PhaseMonitor& monitor,
                    const nlohmann::json& tuning_document, const std::string& nccl_log_path = {})
      : stall_hook_(context, monitor), rails_(config, context, nccl_log_path), tuning_(config.tuning_from_path, tuning_document) {}
  void before_case(const CaseSpec& spec) override {
    stall_hook_.before_case(spec);
    rails_.before_case(spec);
    tuning_.before_case(spec);
  }
  void after_case(CaseResult& result) override {
    stall_hook_.after_case(result);
    rails_.after_case(result);
    tuning_.after_case(result);
  }
  nlohmann::json rails_options_json() const { return rails_.options_json(); }

 private:
  TestStallHook stall_hook_;
  RailCounterObserver rails_;
  TuningAttacher tuning_;
};

}  // namespace cclbench
