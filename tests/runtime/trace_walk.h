// Reads a whole trace record by record: the common part of the runtime tests' trace loaders
// (record_check.h, memory_trace.h), which keep the records they check.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "format/trace_reader.h"
#include "iotwin_abi.h"

namespace iotwin::test {

struct TraceWalk {
  nlohmann::json meta;
  std::optional<nlohmann::json> summary;
  bool truncated = false;
  std::string error;  // the reading problem, empty when the trace read to its end
};

// Calls on_record(reader, header) for every record of the trace at `path`, in file order.
template <typename OnRecord>
TraceWalk WalkTrace(const std::string& path, OnRecord on_record) {
  TraceWalk w;
  auto r = TraceReader::Open(path);
  if (!r.ok()) {
    w.error = r.status().ToString();
    return w;
  }
  auto& reader = *r.value();
  w.meta = reader.meta();
  for (;;) {
    auto n = reader.Next();
    if (!n.ok()) {
      w.error = n.status().ToString();
      break;
    }
    const iot_rec_hdr* h = n.value();
    if (!h) break;
    on_record(reader, h);
  }
  w.summary = reader.summary();
  w.truncated = reader.damage().truncated;
  return w;
}

}  // namespace iotwin::test
