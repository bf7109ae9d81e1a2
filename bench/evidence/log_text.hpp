#pragma once
// Internal helpers shared by the NCCL log parsers: splitting a log into records and small,
// allocation-free scanners. std::regex is avoided on purpose: libstdc++'s implementation recurses
// per character and can overflow the stack on long garbage lines, and inputs here are untrusted.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cclbench::evidence_detail {

// One NCCL log record: "[ts] host:pid:tid [dev] NCCL INFO <message>". Interleaved writers can put
// two records on one physical line; split_records separates them.
struct LogRecord {
  std::string_view host;      // "" when the prefix could not be read
  int pid = -1;
  int tid = -1;
  std::optional<int> cuda_dev;
  bool warn = false;          // NCCL WARN (else INFO or TRACE)
  bool glued = false;         // not the first record on its physical line: interleaved writers, the
                              // host may carry the tail of the previous record glued to its front
  std::string_view message;   // text after "NCCL INFO " / "NCCL WARN " / "NCCL TRACE "
  std::uint64_t line_number = 0;
};

// Calls `on_record` for every record, and `on_other(line, number)` for physical lines with no
// record marker (application output, bare "NCCL version" lines printed at VERSION level).
template <typename OnRecord, typename OnOther>
void split_records(std::string_view text, OnRecord&& on_record, OnOther&& on_other);

std::optional<long long> parse_leading_int(std::string_view text);
std::string_view trim(std::string_view text);
bool contains(std::string_view text, std::string_view needle);
std::vector<std::string_view> split_words(std::string_view text);

// Finds the start of a record prefix ("host:pid:tid [dev] ") that ends right before `marker_pos`
// and fills host/pid/tid/dev. Returns the prefix start, or marker_pos when there is none.
std::size_t read_prefix(std::string_view line, std::size_t marker_pos, LogRecord& record);

inline constexpr std::string_view kMarkers[] = {"NCCL INFO ", "NCCL WARN ", "NCCL TRACE "};

template <typename OnRecord, typename OnOther>
void split_records(std::string_view text, OnRecord&& on_record, OnOther&& on_other) {
  std::uint64_t number = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    ++number;
    start = end + 1;

    // Every marker on the line, in order.
    struct Found { std::size_t pos; std::size_t len; bool warn; };
    std::vector<Found> found;
    for (std::size_t pos = 0; pos < line.size();) {
      std::size_t best = std::string_view::npos;
      std::size_t best_len = 0;
      bool best_warn = false;
      for (std::string_view marker : kMarkers) {
        const std::size_t at = line.find(marker, pos);
        if (at < best) { best = at; best_len = marker.size(); best_warn = marker == kMarkers[1]; }
      }
      if (best == std::string_view::npos) break;
      found.push_back({best, best_len, best_warn});
      pos = best + best_len;
    }
    if (found.empty()) { on_other(line, number); continue; }
    std::vector<LogRecord> records(found.size());
    std::vector<std::size_t> prefix_start(found.size());
    for (std::size_t i = 0; i < found.size(); ++i) {
      records[i].line_number = number;
      records[i].warn = found[i].warn;
      records[i].glued = i > 0;
      prefix_start[i] = read_prefix(line, found[i].pos, records[i]);
    }
    for (std::size_t i = 0; i < found.size(); ++i) {
      const std::size_t message_begin = found[i].pos + found[i].len;
      const std::size_t message_end = i + 1 < found.size() ? prefix_start[i + 1] : line.size();
      records[i].message = message_begin <= message_end
                               ? trim(line.substr(message_begin, message_end - message_begin))
                               : std::string_view{};
      on_record(records[i]);
    }
  }
}

}  // namespace cclbench::evidence_detail
