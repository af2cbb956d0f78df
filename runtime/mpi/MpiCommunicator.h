// Collectives across processes with MPI: one replica per process (rank), started by mpirun or
// mpiexec. The Communicator of runtime/Collectives.h over a duplicate of MPI_COMM_WORLD.
//
// Non-deterministic mode is MPI_Iallreduce in place (MPI picks the algorithm, so the bits may
// depend on the rank count and message size); deterministic mode gathers every contribution and
// reduces them in rank order with reduceInRankOrder, the same bits as LocalGroup on every rank.
// Built only where MPI is found: code that links SmeltMpi sees SMELT_HAVE_MPI defined.
#pragma once

#include "runtime/Collectives.h"

#include <memory>

namespace smelt::rt {

/// True when this process was started by mpirun/mpiexec (or a PMI launcher such as srun):
/// their environment variables (OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_SIZE ...) are set.
bool launchedByMpi();

/// The communicator of this process's rank among all ranks of the job (MPI_COMM_WORLD).
/// Initializes MPI on first use if nobody has (MPI_THREAD_SERIALIZED: calls may come from any
/// one thread at a time), and then finalizes it at process exit, unless a collective timed out
/// or abort() was called (finalizing would wait for ranks that will never come). Collective
/// over the job: every rank must call it, in the same order as its other collectives.
/// Each communicator must be used by one thread at a time.
///
/// Sums: f32, f64, i32, i64 with MPI's built-in MPI_SUM; f16 and bf16 with a user-defined
/// operation that adds in double and rounds to the type after each addition. Mean is the sum
/// divided by size() on each rank once it arrives (for integers, truncating toward zero: with
/// the non-deterministic mode, of the sum as wrapped by MPI_SUM).
Expected<std::unique_ptr<Communicator>> createMpiCommunicator(CollectiveOptions options = {});

} // namespace smelt::rt
