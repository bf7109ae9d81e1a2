// TUNING/COLL line parsing (algorithm and protocol NCCL chose per collective call).
#include <deque>
#include <map>
#include <tuple>

#include "bench/evidence/log_text.hpp"
#include "bench/evidence/nccl_evidence.hpp"

namespace cclbench {

using evidence_detail::contains;
using evidence_detail::LogRecord;
using evidence_detail::parse_leading_int;
using evidence_detail::split_words;
using evidence_detail::trim;

namespace {

// Index order of NCCL_ALGO_* / NCCL_PROTO_* (src/include/device.h); names as ncclAlgoToString
// prints them in 2.24+, so old numeric lines and new named lines compare equal.
constexpr const char* kAlgorithmNames[] = {"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};
constexpr const char* kProtocolNames[] = {"LL", "LL128", "SIMPLE"};
constexpr std::size_t kMaxPendingPerThread = 64;

std::string algorithm_name(std::string_view word) {
  const auto index = parse_leading_int(word);
  if (index && word.find_first_not_of("0123456789") == std::string_view::npos) {
    if (*index >= 0 && *index < static_cast<long long>(std::size(kAlgorithmNames))) return kAlgorithmNames[*index];
    return "algo_" + std::string(word);
  }
  return std::string(word);
}

std::string protocol_name(std::string_view word) {
  const auto index = parse_leading_int(word);
  if (index && word.find_first_not_of("0123456789") == std::string_view::npos) {
    if (*index >= 0 && *index < static_cast<long long>(std::size(kProtocolNames))) return kProtocolNames[*index];
    return "proto_" + std::string(word);
  }
  return std::string(word);
}

std::optional<std::string_view> after(const std::vector<std::string_view>& words, std::string_view name) {
  for (std::size_t i = 0; i + 1 < words.size(); ++i) {
    if (words[i] == name) return words[i + 1];
  }
  return std::nullopt;
}

bool is_identifier(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

}  // namespace

std::vector<TuningChoice> parse_tuning(std::string_view log_text, std::string_view source_name) {
  std::vector<TuningChoice> choices;
  if (log_text.find('\0') != std::string_view::npos) return choices;
  using ThreadKey = std::tuple<std::string, int, int>;
  std::map<ThreadKey, std::deque<TuningChoice>> pending;
  evidence_detail::split_records(
      log_text,
      [&](const LogRecord& record) {
        if (record.warn) return;
        const std::string_view message = record.message;
        const ThreadKey thread{std::string(record.host), record.pid, record.tid};
        const std::size_t name_end = message.find(": ");
        if (name_end != std::string_view::npos && contains(message, ": opCount ")) {
          // COLL: "AllReduce: opCount 0 sendbuff 0x.. recvbuff 0x.. count 2048 datatype 7 op 0 root 0 comm 0x.. [nranks=16] stream 0x.."
          const std::string_view name = message.substr(0, name_end);
          if (!is_identifier(name)) return;
          const auto words = split_words(message);
          TuningChoice call;
          call.collective = std::string(name);
          if (const auto count = after(words, "count")) {
            const auto value = parse_leading_int(*count);
            if (value && *value >= 0) call.count = static_cast<std::uint64_t>(*value);
          }
          if (const auto datatype = after(words, "datatype")) {
            const auto value = parse_leading_int(*datatype);
            if (value && *value >= 0 && *value < 1000) call.datatype = static_cast<int>(*value);
          }
          if (const auto comm = after(words, "comm")) call.comm = std::string(*comm);
          auto& queue = pending[thread];
          queue.push_back(std::move(call));
          if (queue.size() > kMaxPendingPerThread) queue.pop_front();
          return;
        }
        const std::size_t arrow = message.find(" Bytes -> Algo ");
        if (arrow == std::string_view::npos) return;
        TuningChoice choice;
        std::string_view head = message.substr(0, arrow);  // "AllReduce: 8192" or "8192"
        const std::size_t colon = head.find(": ");
        if (colon != std::string_view::npos) {
          if (!is_identifier(head.substr(0, colon))) return;
          choice.collective = std::string(head.substr(0, colon));
          head = trim(head.substr(colon + 2));
        }
        const auto bytes = parse_leading_int(head);
        if (!bytes || *bytes < 0) return;
        choice.bytes = static_cast<std::uint64_t>(*bytes);
        const auto words = split_words(message.substr(arrow + 1));  // "Bytes -> Algo X proto Y ..."
        const auto algo = after(words, "Algo");
        const auto proto = after(words, "proto");
        if (!algo || !proto) return;
        choice.algorithm = algorithm_name(*algo);
        choice.protocol = protocol_name(*proto);
        if (const auto time = after(words, "time")) {
          try {
            choice.predicted_time_us = std::stod(std::string(*time));
          } catch (const std::exception&) {
            // an unreadable estimate stays absent
          }
        }
        const std::size_t channels = message.find("channel{Lo..Hi}={");
        if (channels != std::string_view::npos) {
          const std::string_view range = message.substr(channels + 17);
          const auto lo = parse_leading_int(range);
          const std::size_t dots = range.find("..");
          const auto hi = dots == std::string_view::npos ? std::nullopt : parse_leading_int(range.substr(dots + 2));
          if (lo && hi && *lo >= 0 && *hi >= *lo && *hi < 4096) {
            choice.channel_lo = static_cast<int>(*lo);
            choice.channel_hi = static_cast<int>(*hi);
          }
        }
        // Pair with the oldest pending COLL line of the thread (same collective when the name is known).
        auto& queue = pending[thread];
        for (auto it = queue.begin(); it != queue.end(); ++it) {
          if (choice.collective.empty() || it->collective == choice.collective) {
            if (choice.collective.empty()) choice.collective = it->collective;
            choice.count = it->count;
            choice.datatype = it->datatype;
            choice.comm = it->comm;
            queue.erase(queue.begin(), std::next(it));
            break;
          }
        }
        choice.host = std::string(record.host);
        choice.pid = record.pid;
        choice.source = std::string(source_name) + ":" + std::to_string(record.line_number);
        choices.push_back(std::move(choice));
      },
      [](std::string_view, std::uint64_t) {});
  return choices;
}

}  // namespace cclbench
