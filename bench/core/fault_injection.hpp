#pragma once
// Test-only fault injection: after a checked run and before its comparison, a backend flips chosen
// elements of one rank's receive buffer, so tests can show that the verification catches wrong
// data in every backend, collective, placement and data type, and that every layer above it
// (record, exit status, reports, compare, smoke) says so. Off unless the environment variable
// CCLBENCH_INJECT_WRONG is set; then coll_perf prints one warning line, `--help` describes it and
// the manifest records it.
//
//   CCLBENCH_INJECT_WRONG="count=N[,rank=R][,gpu=G][,collective=NAME][,case=CASE_ID]"
//     count       elements flipped per checked run (1..1048576)
//     rank        MPI world rank (process) whose receive buffer is corrupted            [0]
//                 (the launch's rank, also under coll_perf --split-ranks)
//     gpu         index of that process's GPU with -g N (0..N-1; 0 for the MPI backend) [0]
//     collective  only cases of this collective (a --coll name)                         [all]
//     case        only the case with this case_id, e.g. alltoall.int32.none.out.8K      [all]
//
// The flipped elements are distinct, spread evenly over the elements the check compares (the whole
// receive range, except reduce on a non-root rank, where nothing is compared and nothing is
// flipped), so with -c K a case reports exactly K x min(count, compared elements) wrong elements.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/core/case.hpp"

namespace cclbench {

inline constexpr const char* kFaultInjectionVariable = "CCLBENCH_INJECT_WRONG";

struct FaultInjection {
  std::int64_t count = 0;
  int rank = 0;
  int gpu = 0;
  std::optional<Collective> collective;
  std::string case_id;  // empty: every case
  std::string text;     // the variable's value, for messages and the manifest
};

// Parses the variable's value. Throws UsageError naming the variable for anything malformed.
FaultInjection parse_fault_injection(std::string_view text);

// The parsed variable, or nullopt when it is unset or empty.
std::optional<FaultInjection> fault_injection_from_environment();

// Whether `injection` corrupts `spec` on the process with MPI rank `world_rank`, at its local GPU
// index `local_gpu`.
bool fault_applies(const FaultInjection& injection, const CaseSpec& spec, int world_rank, int local_gpu);

// The receive-buffer indices (in elements, relative to the region the check compares) to flip for
// `spec` on communicator rank `comm_rank`: min(count, compared elements) distinct indices, spread
// over the compared elements, ascending.
std::vector<std::uint64_t> fault_indices(const FaultInjection& injection, const CaseSpec& spec, int comm_rank);

// Flips one element in place (host memory): XOR 0x40 into its most significant byte. For every
// integer type that changes the value by 2^(bits-2); for every float format (IEEE binary16/32/64,
// bfloat16, fp8 E4M3/E5M2) that bit is the top exponent bit, which turns a value v with |v| < 2
// into one >= 2 (or inf/NaN) and a value >= 2 into one < 1: for the pattern's small integers always
// a different bit pattern, and far outside the avg tolerance (relative error >= 1/2, or NaN).
void flip_element(unsigned char* element, std::size_t element_size);

// Throws UsageError when `injection` names a rank or GPU the launch does not have (a hook that
// could never fire would let a test pass for the wrong reason). `gpus_per_process` is -g N for the
// NCCL backend, 1 for the MPI backend.
void check_fault_injection_target(const FaultInjection& injection, int world_size, int gpus_per_process);

// The one warning line coll_perf prints when injection is on (no trailing newline).
std::string fault_injection_warning(const FaultInjection& injection);

// The --help paragraph naming the variable, only while it is set (its raw value is shown, parsed
// or not); empty otherwise.
std::string fault_injection_help();

}  // namespace cclbench
