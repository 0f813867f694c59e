// `iotwin replay --mpi`: one rank of an MPI job replays its part of a job's trace
// (docs/multi-host.md). Talks MPI only through MpiJob (mpi_job.h).
//
// Rank r replays recorded host r of a merged trace (or the host --mpi-hosts names for it), the
// records of other hosts' processes left out by the model (ModelOptions::host), the job's time
// origin kept; a trace of one host is replayed whole by every rank, each on its own file set
// (the multi-host form of --amplify). Every rank replays under ROOT/rank-R. All ranks start
// together after a barrier, whose exit each rank timestamps (CLOCK_REALTIME): the spread is the
// start skew. Rank 0 gathers every rank's summary; with --record each rank records its replay
// into OUT.rank-R and rank 0 merges them into OUT (format/merge.h), one host per rank.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "replay/mpi_job.h"
#include "replay/options.h"
#include "replay/replay.h"

namespace iotwin::replay {

struct MpiReplayOptions {
  ReplayOptions replay;            // root and record_out name the job's; each rank's lie below
  std::vector<std::string> hosts;  // --mpi-hosts: the recorded host of each rank, in rank order
};

// Runs this rank's part of the job. Rank 0's outcome is the job's: every rank's summary, the
// start skew and the merged recording; the other ranks' outcome has their own summary and no
// text. An error on any rank leaves the others waiting in a collective call: the caller stops
// the job (MpiJob::Abort).
Result<ReplayOutcome> RunMpiReplay(const MpiReplayOptions& options, MpiJob& job);

}  // namespace iotwin::replay
