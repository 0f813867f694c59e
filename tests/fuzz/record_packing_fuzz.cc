// libFuzzer target: UnpackRecords (chunk codec 2) must never read or write outside its buffers
// on any decompressed payload, and a payload it accepts must pack back to the same records.
// The trace reader's checksums keep mutated files from reaching the unpacker, hence this
// target on the payload itself. Seeds: tests/fuzz/seeds/record_packing_fuzz/.
#include <cstdint>
#include <cstring>
#include <vector>

#include "format/record_packing.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto len = iotwin::PackedRecordsLength(data, size, "fuzz");
  if (!len.ok() || *len > (1u << 20)) return 0;
  std::vector<uint8_t> out(*len);  // exact size: ASan reports any overrun
  auto records = iotwin::UnpackRecords(data, size, out.data(), out.size(), "fuzz");
  if (!records.ok()) return 0;
  // What unpacked must pack and unpack to itself.
  std::vector<uint8_t> again;
  iotwin::PackRecords(out.data(), out.size(), *records, &again);
  std::vector<uint8_t> back(out.size());
  auto twice = iotwin::UnpackRecords(again.data(), again.size(), back.data(), back.size(), "again");
  if (!twice.ok() || *twice != *records || back != out) __builtin_trap();
  return 0;
}
