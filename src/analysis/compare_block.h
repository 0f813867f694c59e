// compare for device-level streams: how faithfully a block-level replay (`replay --layer block
// --record R`) reproduced the original's requests at the device.
//
// Each trace's requests are those of one device (the replay header's source_dev in the
// original, the busiest device otherwise); the replay's sectors are moved back by its
// device_offset. Measures: request count, bytes, sizes, start-LBA distribution, read share,
// flush/FUA/discard counts (structural, always judged), queue depth over time, inter-arrival
// times and IOPS (timing, judged only when the replay was paced "original" or "gaps", or is not
// a replay), the device's D2C latency (information: it is the target device's, not the
// replay's), and, when both traces have the NVMe layer, the NVMe commands' count, opcode mix and
// sizes (structural). Thresholds: docs/replay.md, "Comparing a device replay".
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/compare.h"
#include "base/status.h"
#include "format/trace_reader.h"

namespace iotwin::analysis {

const std::vector<MeasureSpec>& BlockStreamMeasures();
bool IsBlockStreamMeasure(const std::string& name);

// True when `options.layer` is "block", or "auto" and `replay`'s header says it is a device-level
// replay ("replay": {"layer": "block"}). For "auto" the replay is opened into `*opened`, where the
// caller's pass over it goes on reading.
Result<bool> WantsBlockStreamCompare(const std::string& replay, const CompareOptions& options,
                                     std::unique_ptr<TraceReader>* opened);

// The result holds "layer": "block", "verdict", "measures", "failed", "differences" (one line per
// failed measure saying what differed), and each side's figures. Each trace is read once
// (`opened_replay`: the replay already opened, or null).
Result<nlohmann::json> CompareBlockStreams(const std::string& original, const std::string& replay,
                                           const CompareOptions& options,
                                           std::unique_ptr<TraceReader> opened_replay = nullptr);

// True for a result of CompareBlockStreams.
bool IsBlockStreamResult(const nlohmann::json& result);
std::string RenderBlockStreamText(const nlohmann::json& result);

}  // namespace iotwin::analysis
