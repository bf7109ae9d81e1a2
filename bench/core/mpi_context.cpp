#include "bench/core/mpi_context.hpp"

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>

#include "bench/core/errors.hpp"

namespace cclbench {

MpiSession::MpiSession(int* argc, char*** argv) {
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    throw FatalError(ExitCode::runtime_error, "MPI_Init_thread failed");
  }
  // Errors come back as codes so we can report them with rank and host before aborting.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &context_.world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &context_.world_size);
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, context_.world_rank, MPI_INFO_NULL, &context_.node);
  MPI_Comm_rank(context_.node, &context_.local_rank);
  MPI_Comm_size(context_.node, &context_.local_size);
  char host[HOST_NAME_MAX + 1] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  context_.hostname = host[0] ? host : "unknown-host";
  context_.job_rank = context_.world_rank;
  context_.job_size = context_.world_size;
}

MpiSession::~MpiSession() {
  if (context_.node != MPI_COMM_NULL) MPI_Comm_free(&context_.node);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

MpiGroupSplit::MpiGroupSplit(const MpiContext& job, int group_size) : context_(job) {
  context_.group_index = job.job_rank / group_size;
  context_.group_count = job.job_size / group_size;
  context_.split = true;
  context_.world = MPI_COMM_NULL;
  context_.node = MPI_COMM_NULL;
  mpi_check(MPI_Comm_split(job.world, context_.group_index, job.job_rank, &context_.world), "MPI_Comm_split(--split-ranks)", job);
  MPI_Comm_set_errhandler(context_.world, MPI_ERRORS_RETURN);
  MPI_Comm_rank(context_.world, &context_.world_rank);
  MPI_Comm_size(context_.world, &context_.world_size);
  mpi_check(MPI_Comm_split_type(context_.world, MPI_COMM_TYPE_SHARED, context_.world_rank, MPI_INFO_NULL, &context_.node),
            "MPI_Comm_split_type(--split-ranks group)", context_);
  MPI_Comm_rank(context_.node, &context_.local_rank);
  MPI_Comm_size(context_.node, &context_.local_size);
}

MpiGroupSplit::~MpiGroupSplit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (context_.node != MPI_COMM_NULL) MPI_Comm_free(&context_.node);
  if (context_.world != MPI_COMM_NULL) MPI_Comm_free(&context_.world);
}

void mpi_check(int result, const char* call, const MpiContext& context) {
  if (result == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(result, text, &length);
  throw FatalError(ExitCode::runtime_error, std::string(call) + " failed on rank " + std::to_string(context.world_rank) +
                                                " (" + context.hostname + "): " + std::string(text, length));
}

std::vector<std::string> gather_strings(const MpiContext& context, MPI_Comm communicator, const std::string& local) {
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(communicator, &rank);
  MPI_Comm_size(communicator, &size);
  const int length = static_cast<int>(local.size());
  std::vector<int> lengths(rank == 0 ? size : 0);
  mpi_check(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, communicator), "MPI_Gather(lengths)", context);
  std::vector<int> offsets(lengths.size());
  int total = 0;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    offsets[i] = total;
    total += lengths[i];
  }
  std::string buffer(static_cast<std::size_t>(total), '\0');
  mpi_check(MPI_Gatherv(local.data(), length, MPI_CHAR, buffer.data(), lengths.data(), offsets.data(), MPI_CHAR, 0, communicator),
            "MPI_Gatherv(strings)", context);
  std::vector<std::string> gathered;
  for (std::size_t i = 0; i < lengths.size(); ++i) gathered.push_back(buffer.substr(offsets[i], lengths[i]));
  return gathered;
}

void abort_all_ranks(const MpiContext& context, int exit_code) {
  (void)context;
  // The whole launch, also under --split-ranks (where context.world is one group): Open MPI's abort of a group
  // communicator left the other groups waiting in MPI_Finalize and mpirun hung on a loaded host (CI).
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort should not return; never continue if it does
}

}  // namespace cclbench
