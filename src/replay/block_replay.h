// Device-level replay (--layer block): the captured stream of block requests as the device saw
// them (IOT_REC_BLOCK issue/complete), reissued onto a block device with O_DIRECT through
// io_uring: same sectors (shifted by --device-offset), sizes, directions and flush/FUA/discard
// flags, the recorded queue depth (a request waits until fewer requests are in flight than were
// when it was issued in the trace), and the same pacing modes:
//   original  each request at its recorded issue time relative to the first;
//   gaps      each request the recorded inter-arrival gap after the previous issue;
//   fast      as soon as the queue depth allows.
// Writes destroy the device's contents: the device must be named with --device and allowed with
// --allow-device, and a device that is mounted (itself or a partition) is refused.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "model/trace_model.h"
#include "replay/options.h"

namespace iotwin::replay {

struct BlockReplayOutcome {
  int exit_code = 0;
  nlohmann::json summary;
  std::string text;
};

Result<BlockReplayOutcome> RunBlockReplay(const model::TraceModel& model,
                                          const ReplayOptions& options);

// True when block device `dev` (st_rdev) or one of its partitions is mounted.
Result<bool> DeviceIsMounted(dev_t dev);

}  // namespace iotwin::replay
