#pragma once
// Renderers of a Report: nvbandwidth-style text matrices, JSON (results_schema/p2p_matrix.schema.json)
// and CSV. Host-only, no CUDA, so they are unit-tested without a GPU.
#include <string>

#include <nlohmann/json.hpp>

#include "bench/p2p/results.hpp"

namespace cclbench::p2p {

// 1.1: the one-way d2d bandwidth tests measure their diagonal (the local copy, details.local_copy),
// and device-local copies count the bytes copied (one_direction), not read + write.
inline constexpr const char* kSchemaVersion = "1.1.0";

// One block per test: a title line (name, what it measures), a line with the unit, what bytes are
// counted and the size, then the matrix (rows = source, columns = destination; `-` where absent or
// not applicable, FAIL/ERROR where a measurement failed) and one note per distinct failure/skip reason.
// Several sizes (a sweep) give a table of sizes x pairs instead.
std::string render_test_text(const Report& report, TestId test);

// The peer-access capability matrix and the P2P performance ranks.
std::string render_capability_text(const Report& report);

nlohmann::json to_json(const Report& report);

// Header: test,src,dst,bytes,bytes_counted,host_numa_node,median_gbps,min_gbps,max_gbps,cv_pct,
//         status,reason,median_latency_us,min_latency_us,max_latency_us
// (bytes_counted: one_direction / both_directions / read_plus_write / not_applicable)
std::string to_csv(const Report& report);

// "0", "host", "" (no endpoint)
std::string endpoint_label(const std::optional<Endpoint>& endpoint);

}  // namespace cclbench::p2p
