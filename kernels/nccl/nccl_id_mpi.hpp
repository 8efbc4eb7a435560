// Sharing the NCCL id through MPI, for ranks started across hosts by mpirun / srun
// (docs/VALIDATION.md, "Processes": MPI only exchanges the id). Compiled only when CMake finds MPI (SPARSERING_HAVE_MPI);
// the implementation is kernels/nccl/mpi/nccl_id_mpi.cu. Not exercised by the tests (the test
// machines have no MPI); the id file path (tests/nccl/nccl_world_test.cpp) shares the same id bytes.
#pragma once

#include <nccl.h>

namespace sparsering {

/// Broadcasts the NCCL id from MPI rank 0 of MPI_COMM_WORLD (which creates it) to every MPI
/// rank. The caller has initialised MPI. Throws RingError if MPI fails.
ncclUniqueId broadcast_nccl_id_mpi();

}  // namespace sparsering
