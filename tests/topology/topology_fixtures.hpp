#pragma once
// Where the topology unit tests find their hwloc XML and sysfs fixtures (tests/data/topology).
#include <string>

namespace cclbench::topology {

inline std::string fixture(const std::string& name) { return std::string(CCLBENCH_SOURCE_DIR) + "/tests/data/topology/" + name; }

}  // namespace cclbench::topology
