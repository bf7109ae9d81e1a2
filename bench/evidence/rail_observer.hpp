#pragma once
// Rail counters per case for coll_perf records (rails.hpp reads and compares them).
#include <cstdlib>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/core/config.hpp"
#include "bench/core/mpi_context.hpp"
#include "bench/core/runner.hpp"
#include "bench/evidence/rails.hpp"

namespace cclbench {

// Around every case (never inside the timed loop: before fill, after checking), the node-local
// rank 0 (the node's lowest world rank) reads the rail counters of its node; deltas are gathered
// to world rank 0 per node. Netdev rails (schema 1.5): --netdevs, else the interfaces of NCCL's
// "NET/Socket : Using ..." line in this process's own NCCL log (`nccl_log_path`, written during
// communicator init, so it is looked for before each case until found).
class RailCounterObserver final : public CaseObserver {
 public:
  RailCounterObserver(const Config& config, const MpiContext& context, std::string nccl_log_path = {})
      : config_(config), context_(context), nccl_log_path_(std::move(nccl_log_path)) {
    if (const char* hca = std::getenv("NCCL_IB_HCA")) options_.expected_rails = rails_from_nccl_ib_hca(hca);
    options_.keep_zero_netdevs = config.all_netdevs;
    if (!config.netdevs.empty()) {
      options_.netdev_rails = config.netdevs;
      options_.netdev_rails_from = "--netdevs";
    }
  }
  void before_case(const CaseSpec&) override {
    if (context_.local_rank != 0) return;
    if (options_.netdev_rails.empty() && !nccl_log_path_.empty()) {
      std::ifstream stream(nccl_log_path_);
      std::ostringstream text;
      if (stream) text << stream.rdbuf();
      options_.netdev_rails = socket_interfaces_from_nccl_log(text.str());
      if (!options_.netdev_rails.empty()) options_.netdev_rails_from = "nccl_log";
    }
    before_ = read_rail_counters(config_.sysfs_root);
  }
  void after_case(CaseResult& result) override {
    std::string local;
    if (context_.local_rank == 0) {
      try {
        const RailSnapshot after = read_rail_counters(config_.sysfs_root);
        nlohmann::json delta = rail_delta_json(before_, after, options_);
        delta["host"] = context_.hostname;
        // The same for every node and case: kept once, in the case's rails object.
        delta.erase("expected_rails");
        delta.erase("min_share");
        delta.erase("sysfs_root");  // --sysfs-root, in the document's notes.rails
        local = delta.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      } catch (const std::exception& error) {
        local = nlohmann::json({{"host", context_.hostname}, {"error", std::string("rail counters: ") + error.what()}})
                    .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      }
    }
    const std::vector<std::string> gathered = gather_strings(context_, context_.world, local);
    if (context_.world_rank != 0) return;
    nlohmann::json nodes = nlohmann::json::array();
    nlohmann::json flags = nlohmann::json::array();
    for (const std::string& text : gathered) {
      if (text.empty()) continue;
      nlohmann::json node = nlohmann::json::parse(text, nullptr, false);
      if (node.is_discarded()) continue;
      for (const auto& flag : node.value("flags", nlohmann::json::array())) flags.push_back(node.value("host", "?") + ": " + flag.get<std::string>());
      nodes.push_back(std::move(node));
    }
    // What the counters count is the document's notes.rails, not repeated here.
    // expected_rails and min_share are the same for every case: the document's rails_options.
    result.evidence["rails"] = {
        {"nodes", nodes},
        {"flags", flags}};
  }

 private:
  const Config& config_;
  const MpiContext& context_;
  std::string nccl_log_path_;
  RailOptions options_;
  RailSnapshot before_;

 public:
  nlohmann::json options_json() const {
    return {{"expected_rails", options_.expected_rails}, {"min_share", options_.min_share},
            {"all_netdevs", options_.keep_zero_netdevs}, {"netdevs", config_.netdevs}};
  }
};

}  // namespace cclbench
