// One-line human-readable rendering of a trace record (for `iotwin dump` and test failures).
#pragma once

#include <string>

#include "iotwin_abi.h"

namespace iotwin {

class TraceReader;

// `reader` resolves string ids; may be null.
std::string RecordToText(const iot_rec_hdr* rec, const TraceReader* reader);

}  // namespace iotwin
