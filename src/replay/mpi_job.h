// A process's place in an MPI job (`iotwin replay --mpi`, docs/multi-host.md), behind an
// interface so that only mpi_job_openmpi.cc includes mpi.h and only the `iotwin` binary links
// MPI. A build without MPI links mpi_job_none.cc, whose JoinMpiJob says so.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace iotwin::replay {

// A rank's CLOCK_REALTIME minus rank 0's, from the ping-pong with the shortest round trip.
struct ClockOffset {
  int64_t offset_ns = 0;
  uint64_t error_ns = 0;  // half that round trip
};

class MpiJob {
 public:
  virtual ~MpiJob() = default;  // MPI_Finalize
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Waits until every rank is here; returns this rank's CLOCK_REALTIME read right after.
  virtual Result<uint64_t> Barrier() = 0;
  // Collective: rank 0 exchanges `rounds` ping-pongs with every other rank, each rank stamping
  // its reply with CLOCK_REALTIME. Rank 0 receives one offset per rank (its own 0), the other
  // ranks nothing.
  virtual Result<std::vector<ClockOffset>> MeasureClockOffsets(int rounds) = 0;
  // Rank 0 receives every rank's bytes in rank order; the other ranks receive nothing.
  virtual Result<std::vector<std::string>> GatherToRoot(const std::string& mine) = 0;
  // Stops every rank of the job (MPI_Abort): for the command line's top level only.
  [[noreturn]] virtual void Abort(int exit_code) = 0;
};

// Initialises MPI (MPI_Init) and joins the job this process was started in.
Result<std::unique_ptr<MpiJob>> JoinMpiJob();

// Whether this binary was built with MPI.
bool MpiBuiltIn();

}  // namespace iotwin::replay
