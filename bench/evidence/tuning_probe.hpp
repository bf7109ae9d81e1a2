#pragma once
// Helpers of coll_perf's evidence capture that need no MPI or NCCL, kept here so they are unit-tested:
// NCCL_DEBUG_FILE expansion (to find this process's own log) and matching the TUNING choices of an
// untimed probe run to the cases it ran.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/core/case.hpp"
#include "bench/evidence/nccl_evidence.hpp"

namespace cclbench {

// NCCL_DEBUG_FILE expanded as NCCL's debug.cc does it: %h host (up to its first '.'), %p pid,
// %% a percent sign, any other %x kept as is.
std::string expand_nccl_debug_file(const std::string& pattern, const std::string& host, long pid);

// NCCL's name of a collective in COLL/TUNING lines ("AllReduce"); "" for those NCCL runs as
// grouped send/recv (alltoall, sendrecv), for which no algorithm choice is logged.
std::string nccl_collective_name(Collective collective);

// One entry per case, in order: {case_id, collective, bytes, tuning: to_json(choice) + matched_by,
// or null with "reason"}. A case takes the next unused choice of its collective whose count (or
// byte count) equals the case's ("matched_by": "size"), else the next of its collective ("order").
// `ran[i]` false: the probe did not run case i.
nlohmann::json match_tuning(const std::vector<CaseSpec>& cases, const std::vector<bool>& ran,
                            const std::vector<TuningChoice>& choices);

}  // namespace cclbench
