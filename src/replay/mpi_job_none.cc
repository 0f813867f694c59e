// JoinMpiJob of a build without MPI (mpi_job.h).
#include "replay/mpi_job.h"

namespace iotwin::replay {

Result<std::unique_ptr<MpiJob>> JoinMpiJob() {
  return Status::Unsupported(
      "--mpi: this iotwin was built without MPI (install libopenmpi-dev and build again; "
      "docs/multi-host.md)");
}

bool MpiBuiltIn() { return false; }

}  // namespace iotwin::replay
