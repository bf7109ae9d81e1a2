#include "bench/evidence/nccl_logging.hpp"

#include <algorithm>

#include <gtest/gtest.h>

namespace cclbench {
namespace {

bool noted(const NcclLogPlan& plan, const std::string& text) {
  return std::any_of(plan.notes.begin(), plan.notes.end(),
                     [&](const std::string& note) { return note.find(text) != std::string::npos; });
}

std::string planned(const NcclLogPlan& plan, const std::string& name) {
  for (const auto& [key, value] : plan.to_set) {
    if (key == name) return value;
  }
  return "<unset>";
}

TEST(NcclLogging, CleanEnvironmentGetsInfoEvidenceSubsystemsAndPerProcessFiles) {
  const NcclLogPlan plan = plan_nccl_logging({"PATH=/usr/bin"}, "/runs/r1/nccl/p0");
  EXPECT_EQ(planned(plan, "NCCL_DEBUG"), "INFO");
  EXPECT_EQ(planned(plan, "NCCL_DEBUG_SUBSYS"), "INIT,NET,GRAPH,ENV");
  EXPECT_EQ(planned(plan, "NCCL_DEBUG_FILE"), "/runs/r1/nccl/p0/%h.%p.log");
  EXPECT_EQ(plan.file_pattern, "/runs/r1/nccl/p0/%h.%p.log");
  EXPECT_EQ(plan.log_dir, "/runs/r1/nccl/p0");
  EXPECT_TRUE(plan.evidence_expected);
  EXPECT_TRUE(plan.notes.empty());
}

TEST(NcclLogging, ProbeAddsTuningAndColl) {
  const NcclLogPlan plan = plan_nccl_logging({}, "/tmp/probe", NcclLogPurpose::probe);
  EXPECT_EQ(planned(plan, "NCCL_DEBUG_SUBSYS"), "INIT,NET,GRAPH,ENV,TUNING,COLL");
}

TEST(NcclLogging, UserChoicesAreKeptAndNoted) {
  const NcclLogPlan plan = plan_nccl_logging(
      {"NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT,NET", "NCCL_DEBUG_FILE=/scratch/logs/nccl.%h.%p"}, "/runs/x");
  EXPECT_TRUE(plan.to_set.empty());
  EXPECT_EQ(plan.file_pattern, "/scratch/logs/nccl.%h.%p");
  EXPECT_EQ(plan.log_dir, "/scratch/logs");
  EXPECT_EQ(plan.debug_subsys, "INIT,NET");
  EXPECT_TRUE(plan.evidence_expected);
  EXPECT_TRUE(noted(plan, "NCCL_DEBUG_FILE=/scratch/logs/nccl.%h.%p was set by the user and is kept"));
  EXPECT_TRUE(noted(plan, "NCCL_DEBUG=INFO was set by the user"));
}

TEST(NcclLogging, SubsysWithoutInitOrLevelWithoutInfoLeavesTheGateWithoutEvidence) {
  const NcclLogPlan no_init = plan_nccl_logging({"NCCL_DEBUG_SUBSYS=COLL"}, "/tmp/x");
  EXPECT_FALSE(no_init.evidence_expected);
  EXPECT_TRUE(noted(no_init, "lacks INIT"));
  EXPECT_TRUE(noted(no_init, "COLL or TUNING"));
  const NcclLogPlan no_net = plan_nccl_logging({"NCCL_DEBUG_SUBSYS=INIT"}, "/tmp/x");
  EXPECT_TRUE(no_net.evidence_expected);
  EXPECT_TRUE(noted(no_net, "lacks NET"));
  const NcclLogPlan inverted = plan_nccl_logging({"NCCL_DEBUG_SUBSYS=^COLL"}, "/tmp/x");
  EXPECT_TRUE(inverted.evidence_expected);
  const NcclLogPlan inverted_init = plan_nccl_logging({"NCCL_DEBUG_SUBSYS=^INIT,COLL"}, "/tmp/x");
  EXPECT_FALSE(inverted_init.evidence_expected);
  const NcclLogPlan all = plan_nccl_logging({"NCCL_DEBUG_SUBSYS=ALL"}, "/tmp/x");
  EXPECT_TRUE(all.evidence_expected);
  const NcclLogPlan warn = plan_nccl_logging({"NCCL_DEBUG=WARN"}, "/tmp/x");
  EXPECT_FALSE(warn.evidence_expected);
  EXPECT_TRUE(noted(warn, "prints no INFO lines"));
  EXPECT_EQ(planned(warn, "NCCL_DEBUG_SUBSYS"), "INIT,NET,GRAPH,ENV");
}

TEST(NcclLogging, UserFileWithoutPidOrHostIsWarnedAbout) {
  const NcclLogPlan plan = plan_nccl_logging({"NCCL_DEBUG_FILE=nccl.log"}, "/tmp/x");
  EXPECT_EQ(plan.log_dir, ".");
  EXPECT_TRUE(noted(plan, "no %p"));
  EXPECT_TRUE(noted(plan, "no %h"));
}

}  // namespace
}  // namespace cclbench
