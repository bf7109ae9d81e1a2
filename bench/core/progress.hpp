#pragma once
// Progress lines for a supervising runner (coll_perf --progress): one line per event on stderr,
//   cclbench-progress {"rank":1,"host":"node2","event":"enter","phase":"timed iterations",...}
// each written with a single write(2), so that lines of ranks sharing one stderr (mpirun forwards
// every rank's) never interleave. The runner (scripts/cclbench_lib/execute/progress.py) stops a launch
// that reports nothing past the deadline it last announced plus a grace: a process frozen whole
// (SIGSTOP, a node that locked up) has no watchdog of its own left to act.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace cclbench {

inline constexpr const char* kProgressPrefix = "cclbench-progress ";

class ProgressWriter {
 public:
  // `rank`: the process's rank in the launch (MPI_COMM_WORLD), unique among the lines a runner reads;
  // `group`: its --split-ranks group, added to every line when given.
  ProgressWriter(int fd, int rank, std::string host, std::optional<int> group = std::nullopt)
      : fd_(fd), rank_(rank), host_(std::move(host)), group_(group) {}
  // Writes `fields` with rank, host (and group) added, as one line. Never throws: progress is advisory.
  void emit(nlohmann::json fields) const noexcept;

 private:
  int fd_;
  int rank_;
  std::string host_;
  std::optional<int> group_;
};

// The line for `fields` (rank, host and, when given, group added), with its trailing newline.
std::string progress_line(nlohmann::json fields, int rank, const std::string& host, std::optional<int> group = std::nullopt);

}  // namespace cclbench
