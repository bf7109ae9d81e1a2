// p2p_matrix: the intra-node GPU P2P and host<->device bandwidth/latency matrix.
#include <iostream>
#include <string>

#include "bench/core/errors.hpp"
#include "bench/p2p/app.hpp"

namespace {

std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return cclbench::p2p::run_p2p_matrix(argc, argv);
  } catch (const cclbench::UsageError& e) {
    std::cerr << "p2p_matrix: error: " << one_line(e.what()) << std::endl;
    return cclbench::to_int(cclbench::ExitCode::usage);
  } catch (const cclbench::FatalError& e) {
    std::cerr << "p2p_matrix: error: " << one_line(e.what()) << std::endl;
    return cclbench::to_int(e.code());
  } catch (const std::exception& e) {
    std::cerr << "p2p_matrix: error: " << one_line(e.what()) << std::endl;
    return cclbench::to_int(cclbench::ExitCode::runtime_error);
  }
}
