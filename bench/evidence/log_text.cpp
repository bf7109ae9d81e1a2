#include "bench/evidence/log_text.hpp"

#include <cctype>
#include <limits>

namespace cclbench::evidence_detail {

std::optional<long long> parse_leading_int(std::string_view text) {
  std::size_t i = 0;
  bool negative = false;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) { negative = text[i] == '-'; ++i; }
  const std::size_t digits_begin = i;
  long long value = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const int digit = text[i] - '0';
    if (value > (std::numeric_limits<long long>::max() - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
    ++i;
  }
  if (i == digits_begin) return std::nullopt;
  return negative ? -value : value;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

bool contains(std::string_view text, std::string_view needle) { return text.find(needle) != std::string_view::npos; }

std::vector<std::string_view> split_words(std::string_view text) {
  std::vector<std::string_view> words;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && text[i] == ' ') ++i;
    const std::size_t begin = i;
    while (i < text.size() && text[i] != ' ') ++i;
    if (i > begin) words.push_back(text.substr(begin, i - begin));
  }
  return words;
}

namespace {

// The whitespace-delimited token that ends right before `end` (skipping spaces), and its start.
std::string_view token_before(std::string_view line, std::size_t end, std::size_t& token_start) {
  while (end > 0 && line[end - 1] == ' ') --end;
  std::size_t begin = end;
  while (begin > 0 && line[begin - 1] != ' ') --begin;
  token_start = begin;
  return line.substr(begin, end - begin);
}

bool is_all_digits(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

std::size_t read_prefix(std::string_view line, std::size_t marker_pos, LogRecord& record) {
  // INFO: "host:pid:tid [dev] NCCL INFO"; WARN: "host:pid:tid [dev] file:line NCCL WARN";
  // TRACE: "host:pid:tid [dev] 12.5 file:line NCCL TRACE". Look back at most three tokens for [dev].
  std::size_t cursor = marker_pos;
  for (int hop = 0; hop < 3 && cursor > 0; ++hop) {
    std::size_t token_start = 0;
    const std::string_view token = token_before(line, cursor, token_start);
    if (token.size() >= 3 && token.front() == '[' && token.back() == ']' &&
        is_all_digits(token.substr(1, token.size() - 2))) {
      std::size_t host_start = 0;
      std::string_view host_token = token_before(line, token_start, host_start);
      // A timestamp "[.. ..] " directly glued to the host is not possible (NCCL adds a space), but an
      // interleaved neighbour can be glued to the front; keep only the last "a:b:c" part.
      const std::size_t last_colon = host_token.rfind(':');
      if (last_colon == std::string_view::npos || last_colon == 0) return marker_pos;
      const std::size_t middle_colon = host_token.rfind(':', last_colon - 1);
      if (middle_colon == std::string_view::npos || middle_colon == 0) return marker_pos;
      const std::string_view tid = host_token.substr(last_colon + 1);
      const std::string_view pid = host_token.substr(middle_colon + 1, last_colon - middle_colon - 1);
      if (!is_all_digits(tid) || !is_all_digits(pid) || pid.size() > 9 || tid.size() > 9) return marker_pos;
      record.host = host_token.substr(0, middle_colon);
      record.pid = static_cast<int>(*parse_leading_int(pid));
      record.tid = static_cast<int>(*parse_leading_int(tid));
      const auto dev = parse_leading_int(token.substr(1, token.size() - 2));
      if (dev && *dev < 1000000) record.cuda_dev = static_cast<int>(*dev);
      return host_start;
    }
    cursor = token_start;
  }
  return marker_pos;
}

}  // namespace cclbench::evidence_detail
