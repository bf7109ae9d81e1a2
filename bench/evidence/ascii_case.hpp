#pragma once
// ASCII upper case for the evidence library's case-blind matching (NCCL_DEBUG levels and subsystems, transport
// names, secret-looking variable names): one copy for manifest.cpp, nccl_logging.cpp and transport_gate.cpp.
#include <cctype>
#include <string>
#include <string_view>

namespace cclbench::evidence_detail {

inline std::string upper(std::string_view text) {
  std::string result(text);
  for (char& c : result) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return result;
}

}  // namespace cclbench::evidence_detail
