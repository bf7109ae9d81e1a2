#pragma once
// The four collectives (plus broadcast, reduce, sendrecv) through MPI on host memory: the NCCL vs
// MPI comparison, and the whole runner exercised end to end on machines without a GPU.
#include <memory>
#include <optional>
#include <vector>

#include "bench/core/backend.hpp"
#include "bench/core/fault_injection.hpp"
#include "bench/core/mpi_context.hpp"

namespace cclbench {

// Allocates send and receive buffers once, large enough for the largest of `cases`. With
// `injection` (tests only), count_wrong() first flips the chosen received elements on its rank.
std::unique_ptr<Backend> make_mpi_backend(const MpiContext& context, const std::vector<CaseSpec>& cases,
                                          std::optional<FaultInjection> injection = std::nullopt);

}  // namespace cclbench
