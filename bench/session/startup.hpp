#pragma once
// coll_perf's start: the program name, argv parsed on every rank, and one agreed usage error.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/core/config.hpp"
#include "bench/core/mpi_context.hpp"
#include "bench/evidence/transport_gate.hpp"

namespace cclbench {

// argv[0] without its directory ("all_reduce_perf"); "coll_perf" when there is none.
std::string program_name(const char* argv0);

// What the run starts from, checked before anything is measured (a typo must not cost a run).
struct StartupInput {
  Config config;
  nlohmann::json tuning_document;    // --tuning-from's file, read by rank 0 (null elsewhere)
  std::optional<ExpectSpec> expect;  // --expect-transport
  std::vector<SplitPoint> split_points;  // --split-points, on every rank (empty without --split-ranks)
};

// Parses argv on every rank; rank 0 also checks the output files and reads --tuning-from, and with
// --split-ranks checks that N divides the job and reads --split-points (its entry count, points and
// paths, each path checked as -J's). Every rank then throws rank 0's usage error, if any, so all exit
// 2 together with one message, before anything is measured. The points reach every rank from rank 0
// (the file need only be where rank 0 runs). nullopt after --help.
std::optional<StartupInput> agree_on_startup(int argc, char** argv, const MpiContext& context);

// --split-ranks: the start-up of the run of `group` (its point and -J from --split-points).
StartupInput startup_of_group(StartupInput input, const MpiContext& group);

}  // namespace cclbench
