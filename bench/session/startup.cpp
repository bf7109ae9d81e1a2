#include "bench/session/startup.hpp"

#include <utility>

#include "bench/core/errors.hpp"
#include "bench/core/file_io.hpp"
#include "bench/evidence/tuning_run.hpp"

namespace cclbench {
namespace {

void check_outputs(const Config& config) {
  if (!config.json_path.empty()) check_writable_output(config.json_path, "-J");
  if (!config.csv_path.empty()) check_writable_output(config.csv_path, "--csv");
  if (!config.jsonl_path.empty()) check_writable_output(config.jsonl_path, "--jsonl");
  if (!config.samples_path.empty()) check_writable_output(config.samples_path, "--samples");
  if (!config.tuning_probe_path.empty()) check_writable_output(config.tuning_probe_path, "--tuning-probe");
}

// Every rank agrees on one usage error (rank 0's), so all exit 2 together with one message.
void agree_on_usage(const MpiContext& context, std::string local_error) {
  int length = context.world_rank == 0 ? static_cast<int>(local_error.size()) : 0;
  mpi_check(MPI_Bcast(&length, 1, MPI_INT, 0, context.world), "MPI_Bcast(usage)", context);
  if (length == 0) return;
  local_error.resize(length);
  mpi_check(MPI_Bcast(local_error.data(), length, MPI_CHAR, 0, context.world), "MPI_Bcast(usage)", context);
  throw UsageError(local_error);
}

// --split-ranks N over a job of `job_size` ranks: the --split-points file's text, checked (rank 0).
std::string read_split_points(const Config& config, int job_size) {
  if (job_size % config.split_ranks != 0) {
    throw UsageError("--split-ranks " + std::to_string(config.split_ranks) + " does not divide the job's " +
                     std::to_string(job_size) + " rank(s) (accepted: a divisor, e.g. the ranks of one pair)");
  }
  std::string text = read_text_file(config.split_points_path);
  for (const SplitPoint& point : parse_split_points(text, config.split_points_path, job_size / config.split_ranks)) {
    check_writable_output(point.json_path, "--split-points json");
  }
  return text;
}

std::optional<StartupInput> read_startup(int argc, char** argv, const MpiContext& context, std::string* split_points_text) {
  const bool writer = context.job_rank == 0;
  std::optional<Config> config = parse_config(argc, argv);
  if (!config) return std::nullopt;
  StartupInput input{std::move(*config), nullptr, std::nullopt, {}};
  if (!input.config.expect_transport.empty()) input.expect = parse_expect_spec(input.config.expect_transport);
  if (writer) {
    check_outputs(input.config);
    if (!input.config.tuning_from_path.empty()) input.tuning_document = read_tuning_file(input.config.tuning_from_path);
    if (input.config.split_ranks > 0) *split_points_text = read_split_points(input.config, context.job_size);
  }
  return input;
}

// Rank 0's checked --split-points text to every rank.
std::string share_split_points(const MpiContext& context, std::string text) {
  unsigned long long length = text.size();
  mpi_check(MPI_Bcast(&length, 1, MPI_UNSIGNED_LONG_LONG, 0, context.world), "MPI_Bcast(split points length)", context);
  text.resize(length);
  mpi_check(MPI_Bcast(text.data(), static_cast<int>(length), MPI_CHAR, 0, context.world), "MPI_Bcast(split points)", context);
  return text;
}

}  // namespace

std::string program_name(const char* argv0) {
  const std::string path = argv0 ? argv0 : "coll_perf";
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::optional<StartupInput> agree_on_startup(int argc, char** argv, const MpiContext& context) {
  std::optional<StartupInput> input;
  std::string usage_error;
  std::string split_points_text;
  try {
    input = read_startup(argc, argv, context, &split_points_text);
  } catch (const UsageError& error) {
    usage_error = error.what();
  } catch (const FatalError& error) {
    usage_error = error.what();
  }
  agree_on_usage(context, usage_error);
  if (input && input->config.split_ranks > 0) {
    const Config& config = input->config;
    input->split_points = parse_split_points(share_split_points(context, std::move(split_points_text)),
                                             config.split_points_path, context.job_size / config.split_ranks);
  }
  return input;
}

StartupInput startup_of_group(StartupInput input, const MpiContext& group) {
  const SplitPoint& mine = input.split_points.at(static_cast<std::size_t>(group.group_index));
  input.config.point = mine.point;
  input.config.json_path = mine.json_path;
  return input;
}

}  // namespace cclbench
