// libFuzzer target: TraceReader must never crash, hang or allocate wildly on any input, in strict
// and salvage mode. Seeds: any valid trace (tests/fuzz/corpus/ is created by the test script).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "format/records.h"
#include "format/trace_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fd = memfd_create("trace", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (write(fd, data, size) != static_cast<ssize_t>(size)) {
    close(fd);
    return 0;
  }
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  for (bool salvage : {false, true}) {
    iotwin::TraceReaderOptions o;
    o.salvage = salvage;
    o.max_chunk_bytes = 1 << 20;
    auto r = iotwin::TraceReader::Open(path, o);
    if (!r.ok()) continue;
    for (int i = 0; i < 1'000'000; i++) {
      auto n = (*r)->Next();
      if (!n.ok() || !*n) break;
      // Touch the whole fixed part: it must be readable (zero-extended when short).
      volatile uint64_t sink = iotwin::RecordTimestamp(*n);
      (void)sink;
      if ((*n)->type == IOT_REC_STRING) (void)(*r)->String(iotwin::As<iot_string>(*n).id);
    }
    (void)(*r)->SeekTime(0);
  }
  close(fd);
  return 0;
}
