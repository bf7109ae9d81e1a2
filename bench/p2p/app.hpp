#pragma once
// p2p_matrix's whole program behind main(): parse, measure, render, write. Throws UsageError for bad
// input (exit 2) and FatalError for everything else (exit code inside); returns 0 on success.
namespace cclbench::p2p {

int run_p2p_matrix(int argc, const char* const argv[]);

}  // namespace cclbench::p2p
