#pragma once
// The MPI session of one process: world and node-local ranks, hostname. Created once in main()
// (MPI_Init_thread with MPI_THREAD_MULTIPLE when available, else FUNNELED) and passed down.
// Works as a singleton (no mpirun) too. With coll_perf --split-ranks N the run's `world` is this
// rank's group of the job (MpiGroupSplit below): everything that is per run (collectives, gathers,
// the manifest, the watchdog's abort order) then happens within the group.
#include <mpi.h>

#include <string>
#include <vector>

namespace cclbench {

struct MpiContext {
  MPI_Comm world = MPI_COMM_WORLD;  // the run's ranks: the job's, or this rank's --split-ranks group
  MPI_Comm node = MPI_COMM_NULL;  // ranks of `world` on this host (MPI_Comm_split_type SHARED)
  int world_rank = 0;             // rank within `world`
  int world_size = 1;
  int local_rank = 0;             // rank within `node`
  int local_size = 1;
  std::string hostname;
  // Where the run sits in the launch: its MPI_COMM_WORLD rank and size, and with --split-ranks its
  // group (consecutive job ranks group_index*N .. group_index*N+N-1). Unsplit: group 0 of 1, job = world.
  int job_rank = 0;
  int job_size = 1;
  int group_index = 0;
  int group_count = 1;
  bool split = false;             // set by MpiGroupSplit
};

// RAII: MPI_Init_thread in the constructor, MPI_Finalize in the destructor. Errors on MPI calls
// return (MPI_ERRORS_RETURN) and are turned into FatalError by mpi_check().
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  const MpiContext& context() const { return context_; }

 private:
  MpiContext context_;
};

// --split-ranks N: the job's ranks in consecutive groups of N, each with its own communicator (and
// node-local communicator within it). Collective over the job; `group_size` must divide the job's size
// (the caller has checked). Frees both communicators on destruction, before MpiSession finalizes.
class MpiGroupSplit {
 public:
  MpiGroupSplit(const MpiContext& job, int group_size);
  ~MpiGroupSplit();
  MpiGroupSplit(const MpiGroupSplit&) = delete;
  MpiGroupSplit& operator=(const MpiGroupSplit&) = delete;
  const MpiContext& context() const { return context_; }

 private:
  MpiContext context_;
};

// Throws FatalError(runtime_error) naming the call, rank and host when `result` != MPI_SUCCESS.
void mpi_check(int result, const char* call, const MpiContext& context);

// Gathers one string from every rank of `communicator` to its rank 0 (in rank order there;
// empty elsewhere). Used for per-rank evidence: binding records, log texts, counter deltas.
std::vector<std::string> gather_strings(const MpiContext& context, MPI_Comm communicator, const std::string& local);

// Ends every rank of the launch now: prints nothing itself (callers print first), then
// MPI_Abort(MPI_COMM_WORLD, code), also under --split-ranks.
[[noreturn]] void abort_all_ranks(const MpiContext& context, int exit_code);

}  // namespace cclbench
