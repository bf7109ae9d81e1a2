#include "bench/core/progress.hpp"

#include <unistd.h>

#include <cerrno>

namespace cclbench {

std::string progress_line(nlohmann::json fields, int rank, const std::string& host, std::optional<int> group) {
  fields["rank"] = rank;
  fields["host"] = host;
  if (group) fields["group"] = *group;
  return kProgressPrefix + fields.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

void ProgressWriter::emit(nlohmann::json fields) const noexcept {
  try {
    const std::string line = progress_line(std::move(fields), rank_, host_, group_);
    const char* data = line.data();
    std::size_t left = line.size();
    while (left > 0) {
      const ssize_t written = ::write(fd_, data, left);
      if (written < 0 && errno == EINTR) continue;
      if (written <= 0) return;
      data += written;
      left -= static_cast<std::size_t>(written);
    }
  } catch (...) {
  }
}

}  // namespace cclbench
