#pragma once
// coll_perf's start: the program name, argv parsed on every rank, and one agreed usage error.
#include <optional>
#include <string>

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
};

// Parses argv on every rank; rank 0 also checks the output files and reads --tuning-from. Every
// rank then throws rank 0's usage error, if any, so all exit 2 together with one message. nullopt
// after --help.
std::optional<StartupInput> agree_on_startup(int argc, char** argv, const MpiContext& context);

}  // namespace cclbench
