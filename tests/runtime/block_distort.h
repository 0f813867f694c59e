// The device-level replay tests' distortion of a recorded trace, replayed to show that compare
// catches an unfaithful replay (replay_block_verify_test.cc on loop devices, nvme_replay_test.cc
// in the emulated NVMe guest).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "format/records.h"
#include "format/trace_reader.h"
#include "format/trace_writer.h"

namespace iotwin::test {

// On device `dev`, every 10th issued request is dropped (its ISSUE record; the orphaned
// completion matches nothing) and the rest are twice their recorded size. Everything else is
// copied as it is.
inline Status WriteDistorted(const std::string& in, const std::string& out, uint32_t dev) {
  IOTWIN_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(in, {}));
  IOTWIN_ASSIGN_OR_RETURN(auto writer, TraceWriter::Create(out, reader->meta()));
  uint64_t issued = 0;
  while (true) {
    IOTWIN_ASSIGN_OR_RETURN(const iot_rec_hdr* rec, reader->Next());
    if (!rec) break;
    if (rec->type == IOT_REC_BLOCK && As<iot_block>(rec).dev == dev &&
        As<iot_block>(rec).phase == IOT_BLK_ISSUE) {
      if (++issued % 10 == 0) continue;
      iot_block b = As<iot_block>(rec);
      b.bytes *= 2;
      b.nr_sector *= 2;
      IOTWIN_RETURN_IF_ERROR(writer->Append(b));
      continue;
    }
    IOTWIN_RETURN_IF_ERROR(writer->Append(rec));
  }
  return writer->Finish(reader->summary().value_or(nlohmann::json::object()));
}

}  // namespace iotwin::test
