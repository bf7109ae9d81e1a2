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

std::optional<StartupInput> read_startup(int argc, char** argv, bool writer) {
  std::optional<Config> config = parse_config(argc, argv);
  if (!config) return std::nullopt;
  StartupInput input{std::move(*config), nullptr, std::nullopt};
  if (!input.config.expect_transport.empty()) input.expect = parse_expect_spec(input.config.expect_transport);
  if (writer) {
    check_outputs(input.config);
    if (!input.config.tuning_from_path.empty()) input.tuning_document = read_tuning_file(input.config.tuning_from_path);
  }
  return input;
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
  try {
    input = read_startup(argc, argv, context.world_rank == 0);
  } catch (const UsageError& error) {
    usage_error = error.what();
  } catch (const FatalError& error) {
    usage_error = error.what();
  }
  agree_on_usage(context, usage_error);
  return input;
}

}  // namespace cclbench
