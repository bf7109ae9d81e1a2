#include "bench/core/deadlines.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <vector>

#include "bench/core/units.hpp"

namespace cclbench {
namespace {

// The worst case when nothing was measured (plan/bounds.py's LEARNED_FIRST_RATE_BYTES_PER_S and
// TRAFFIC_FACTOR): every byte at 1 MB/s (8 Mbit/s: below the slow rails a bring-up must still measure,
// 40-200 Mbit/s), a rank moving at most 2 x S, a ring step at most 20 ms. It only ever applies to the
// first case of a launch, the smallest size of a sweep.
constexpr double kSlowestRateBytesPerSecond = 1e6;
constexpr double kTrafficFactor = 2;
constexpr double kStepSeconds = 0.02;

// The floors, per backend (docs/results.md "How long a launch may take"): a phase on a loaded host
// waits several scheduler slices; NCCL's lazy connect at thousands of ranks takes tens of seconds.
constexpr double kPhaseFloorSeconds = 20;
constexpr double kNcclConnectFloorSeconds = 40;
constexpr double kMpiConnectFloorSeconds = 20;
constexpr double kConnectSecondsPerRank = 0.02;
constexpr double kSlack = 10;

bool is_collective_phase(Phase phase) {
  return phase == Phase::warm_up || phase == Phase::timed || phase == Phase::check || phase == Phase::probe;
}

bool is_learned_phase(Phase phase) { return phase != Phase::boundary && phase != Phase::stall; }

// Three significant digits below 10 s, whole seconds above (watchdog.cpp's shortest_seconds_text keeps more).
std::string coarse_seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), seconds < 10 ? "%.3g" : "%.0f", seconds);
  return text;
}

}  // namespace

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::boundary: return "case boundary or result exchange";
    case Phase::fill: return "fill";
    case Phase::warm_up: return "warm-up";
    case Phase::timed: return "timed iterations";
    case Phase::check: return "check";
    case Phase::probe: return "tuning probe call";
    case Phase::stall: return "test stall, CCLBENCH_TEST_STALL";
  }
  return "?";
}

double startup_allowance_seconds(int nranks) {
  return kPhaseFloorSeconds + kNcclConnectFloorSeconds + kConnectSecondsPerRank * std::max(1, nranks);
}

DeadlineSettings deadline_settings(const std::string& backend, int nranks, double ceiling_s) {
  DeadlineSettings settings;
  settings.floor_s = kPhaseFloorSeconds;
  settings.connect_floor_s = (backend == "mpi" ? kMpiConnectFloorSeconds : kNcclConnectFloorSeconds) +
                             kConnectSecondsPerRank * std::max(1, nranks);
  settings.slack = kSlack;
  settings.ceiling_s = ceiling_s;
  settings.nranks = std::max(1, nranks);
  return settings;
}

double DeadlineModel::worst_case_seconds(const CaseSpec& spec, Phase phase) const {
  const double bytes = static_cast<double>(spec.counts.size_bytes());
  if (phase == Phase::fill) return bytes / kSlowestRateBytesPerSecond;
  const int calls = phase == Phase::warm_up ? settings_.warm_up_calls
                    : phase == Phase::timed ? settings_.timed_calls
                    : phase == Phase::check ? settings_.check_calls
                                            : 1;
  const double call = kStepSeconds * 2 * settings_.nranks + kTrafficFactor * bytes / kSlowestRateBytesPerSecond;
  return std::max(1, calls) * call;
}

std::optional<DeadlineModel::Prediction> DeadlineModel::predict(const CaseSpec& spec, Phase phase) const {
  const std::uint64_t bytes = std::max<std::uint64_t>(1, spec.counts.size_bytes());
  // The largest measured size at or below `bytes` in one (phase, collective) series, scaled to `bytes`.
  auto scaled = [&](const std::map<std::uint64_t, double>& series) -> std::optional<std::pair<std::uint64_t, double>> {
    auto above = series.upper_bound(bytes);
    if (above == series.begin()) return std::nullopt;
    const auto& [size, seconds] = *std::prev(above);
    return std::make_pair(size, seconds * static_cast<double>(bytes) / static_cast<double>(std::max<std::uint64_t>(1, size)));
  };
  const int phase_key = static_cast<int>(phase);
  const auto own = measured_.find({phase_key, static_cast<int>(spec.collective)});
  if (own != measured_.end()) {
    if (const auto found = scaled(own->second)) {
      const double at = own->second.at(found->first);
      return Prediction{found->second, std::string(name_of(spec.collective)) + " " + format_size(found->first) + "'s " +
                                           phase_name(phase) + " (" + coarse_seconds_text(at) + " s)"};
    }
  }
  std::optional<Prediction> best;
  for (const auto& [key, series] : measured_) {
    if (key.first != phase_key) continue;
    if (const auto found = scaled(series); found && (!best || found->second > best->seconds)) {
      const double at = series.at(found->first);
      best = Prediction{found->second, std::string(name_of(static_cast<Collective>(key.second))) + " " +
                                           format_size(found->first) + "'s " + phase_name(phase) + " (" +
                                           coarse_seconds_text(at) + " s)"};
    }
  }
  return best;
}

Deadline DeadlineModel::deadline(const CaseSpec& spec, Phase phase) const {
  if (phase == Phase::stall) {
    // The test hook's rank sleeps as if inside the case's first collective: the warm-up's deadline, the one its
    // peers wait under.
    Deadline as_warm_up = deadline(spec, Phase::warm_up);
    as_warm_up.basis = "as the warm-up's: " + as_warm_up.basis;
    return as_warm_up;
  }
  Deadline deadline;
  std::ostringstream basis;
  double seconds = settings_.floor_s;
  basis << coarse_seconds_text(settings_.floor_s) << " s floor";
  if (is_learned_phase(phase)) {
    if (const auto prediction = predict(spec, phase)) {
      deadline.predicted_s = prediction->seconds;
      seconds += settings_.slack * prediction->seconds;
      basis << " + " << coarse_seconds_text(settings_.slack) << " x " << coarse_seconds_text(prediction->seconds)
            << " s predicted from " << prediction->from << " scaled by bytes";
    } else {
      const double worst = worst_case_seconds(spec, phase);
      const int calls = phase == Phase::timed ? settings_.timed_calls : phase == Phase::check ? settings_.check_calls : 0;
      if (calls > 0 && warm_up_case_ == spec.case_id()) {
        // Measured beats assumed: the case's own warm-up ran the same calls (if it was the connect too, the
        // prediction errs long).
        const double from_warm_up = warm_up_seconds_ * calls / std::max(1, settings_.warm_up_calls);
        deadline.predicted_s = from_warm_up;
        seconds += settings_.slack * from_warm_up;
        basis << " + " << coarse_seconds_text(settings_.slack) << " x " << coarse_seconds_text(from_warm_up)
              << " s predicted from this case's warm-up (" << settings_.warm_up_calls << " call(s) in "
              << coarse_seconds_text(warm_up_seconds_) << " s; nothing smaller measured yet)";
      } else {
        seconds += worst;
        basis << " + " << coarse_seconds_text(worst) << " s worst case (nothing smaller measured yet: every byte at 1 MB/s)";
      }
    }
    if (!connected_ && is_collective_phase(phase)) {
      seconds += settings_.connect_floor_s;
      basis << " + " << coarse_seconds_text(settings_.connect_floor_s) << " s connect floor (" << settings_.nranks
            << " ranks, the communicator's first collective)";
    }
  }
  if (settings_.ceiling_s > 0 && seconds > settings_.ceiling_s) {
    seconds = settings_.ceiling_s;
    basis << ", capped at the -T ceiling " << coarse_seconds_text(settings_.ceiling_s) << " s";
  }
  deadline.seconds = seconds;
  deadline.basis = basis.str();
  return deadline;
}

void DeadlineModel::record(const CaseSpec& spec, Phase phase, double seconds) {
  if (!is_learned_phase(phase)) return;
  if (phase == Phase::warm_up) {
    warm_up_case_ = spec.case_id();
    warm_up_seconds_ = seconds;
  }
  // The first collective phase includes the connections: it counts toward nothing but the connect.
  if (is_collective_phase(phase) && !connected_) {
    connected_ = true;
    if (phase == Phase::warm_up || phase == Phase::probe) return;
  }
  double& longest = measured_[{static_cast<int>(phase), static_cast<int>(spec.collective)}][spec.counts.size_bytes()];
  longest = std::max(longest, seconds);
}

std::string DeadlineModel::history(const CaseSpec& spec, Phase phase, std::size_t limit) const {
  const auto own = measured_.find({static_cast<int>(phase), static_cast<int>(spec.collective)});
  if (own == measured_.end()) return {};
  std::vector<std::string> parts;
  for (const auto& [size, seconds] : own->second) {
    if (size > spec.counts.size_bytes()) break;
    parts.push_back(format_size(size) + " " + coarse_seconds_text(seconds) + " s");
  }
  if (parts.size() > limit) parts.erase(parts.begin(), parts.end() - static_cast<std::ptrdiff_t>(limit));
  std::string text;
  for (const std::string& part : parts) text += (text.empty() ? "" : ", ") + part;
  return text;
}

}  // namespace cclbench
