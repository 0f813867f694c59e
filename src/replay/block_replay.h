// Device-level replay (--layer block): the captured stream of block requests as the device saw
// them (IOT_REC_BLOCK issue/complete), reissued onto a block device with O_DIRECT through
// io_uring: same sectors (shifted by --device-offset), sizes, directions and flush/FUA/discard
// flags, and the same pacing modes:
//   original  each request at its recorded issue time relative to the first, whatever is in
//             flight (up to a bound of hundreds): the queue depth the device sees is then the
//             recorded one where it is as fast as the recorded device, and deeper (counted in
//             the summary's deeper_than_recorded) where it is slower;
//   gaps      each request the recorded inter-arrival gap after the previous issue, once fewer
//             requests are in flight than were when it was issued in the trace;
//   fast      as soon as that recorded queue depth allows.
// Writes destroy the device's contents: the device must be named with --device and allowed with
// --allow-device, and a device that is mounted (itself or a partition) is refused. Sectors and
// sizes come from the trace (untrusted): a request whose byte range overflows 64 bits, lies
// outside [--device-offset, device size) after placement, or is too large to buffer is not
// issued; it is counted under "refused" and named in the warnings.
// --record OUT captures the replay's own block and NVMe layers (and the replaying thread's calls)
// with `iotwin record --pid <self>` (replay/recorder.h); OUT's header names the source trace, the
// layer ("block"), the pace, the target device and offset under "replay". An OUT that cannot be
// written, or a tracer that does not start, stops the replay before any request is issued.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

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

// Why a recorded request is not issued.
enum class BlockRefusal : uint8_t {
  kNone = 0,
  kRangeOverflow,  // sector * 512 + bytes does not fit in 64 bits
  kOutsideDevice,  // its placed range is not inside [--device-offset, device size)
  kTooLarge,       // a read or write larger than kMaxBlockTransferBytes
  kCount,
};
const char* BlockRefusalName(BlockRefusal r);

// Reads and writes go through one buffer of the largest request's size; a trace claiming more is
// refused rather than allocated for (no device takes a single request this large).
inline constexpr uint64_t kMaxBlockTransferBytes = 64ull << 20;

// Where each request of a replay goes on the target device.
struct BlockLayout {
  struct Placement {
    uint64_t offset = 0;  // absolute byte offset on the target (0 for flushes)
    uint64_t bytes = 0;   // length of the range (0 for flushes)
    BlockRefusal refused = BlockRefusal::kNone;
  };
  std::vector<Placement> placements;  // one per request, in the same order
  uint64_t extent = 0;                // end of the furthest recorded range, from --device-offset
  bool wrapped = false;               // ranges were folded into the room (--wrap)
  uint64_t max_transfer = 4096;       // largest accepted read or write (buffer size)
  std::array<uint64_t, static_cast<size_t>(BlockRefusal::kCount)> refused{};
  uint64_t refused_total() const;
};

// Places each request's range [sector * 512, + bytes) at `device_offset` on a device of
// `dev_size` bytes, every sum and product checked. Ranges beyond the room after the offset are
// an error unless `wrap`, which folds them into the room. Requests that cannot be placed are
// marked refused, not dropped.
Result<BlockLayout> PlaceBlockRequests(const std::vector<const model::BlockRequest*>& reqs,
                                       uint64_t dev_size, uint64_t device_offset, bool wrap);

Result<BlockReplayOutcome> RunBlockReplay(const model::TraceModel& model,
                                          const ReplayOptions& options);

// True when block device `dev` (st_rdev) or one of its partitions is mounted.
Result<bool> DeviceIsMounted(dev_t dev);

}  // namespace iotwin::replay
