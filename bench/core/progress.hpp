#pragma once
// Progress lines for a supervising runner (coll_perf --progress): one line per event on stderr,
//   cclbench-progress {"rank":1,"host":"node2","event":"enter","phase":"timed iterations",...}
// each written with a single write(2), so that lines of ranks sharing one stderr (mpirun forwards
// every rank's) never interleave. The runner (scripts/cclbench_lib/execute/progress.py) stops a launch
// that reports nothing past the deadline it last announced plus a grace: a process frozen whole
// (SIGSTOP, a node that locked up) has no watchdog of its own left to act.
#include <string>

#include <nlohmann/json.hpp>

namespace cclbench {

inline constexpr const char* kProgressPrefix = "cclbench-progress ";

class ProgressWriter {
 public:
  ProgressWriter(int fd, int rank, std::string host) : fd_(fd), rank_(rank), host_(std::move(host)) {}
  // Writes `fields` with rank and host added, as one line. Never throws: progress is advisory.
  void emit(nlohmann::json fields) const noexcept;

 private:
  int fd_;
  int rank_;
  std::string host_;
};

// The line for `fields` (rank and host added), with its trailing newline.
std::string progress_line(nlohmann::json fields, int rank, const std::string& host);

}  // namespace cclbench
