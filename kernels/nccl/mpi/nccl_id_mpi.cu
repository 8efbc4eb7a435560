#include "kernels/nccl/nccl_id_mpi.hpp"

#include <mpi.h>

#include "common/error.hpp"
#include "kernels/nccl/nccl_world.hpp"
#include "kernels/ring/ring_error.hpp"

namespace sparsering {

ncclUniqueId broadcast_nccl_id_mpi() {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (initialised == 0) throw RingError("sharing the NCCL id through MPI needs MPI_Init first");
  int rank = 0;
  if (MPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS) throw RingError("MPI_Comm_rank failed");
  ncclUniqueId id{};
  if (rank == 0) id = NcclWorld::new_id();
  if (MPI_Bcast(id.internal, static_cast<int>(sizeof id.internal), MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
    throw RingError(str("MPI_Bcast of the NCCL id failed on MPI rank ", rank));
  }
  return id;
}

}  // namespace sparsering
