// Shared driver of the importer fuzz targets: an importer must never crash, hang or emit a
// malformed record (bad size, a string id it never defined) on any input.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "interop/importer.h"
#include "interop/line_reader.h"
#include "interop/record_sink.h"

namespace iotwin::interop::fuzz {

// Interns strings and checks every record instead of storing it.
class CheckingSink : public RecordSink {
 public:
  Result<uint32_t> InternString(std::string_view s) override {
    (void)s;  // any length: real sinks truncate to IOT_STRING_MAX
    return ++strings_;
  }
  Status Append(const iot_rec_hdr* rec) override {
    if (rec->size < sizeof(iot_rec_hdr) || rec->type == 0 || rec->type > IOT_REC_MAX) __builtin_trap();
    auto id_ok = [&](uint32_t id) { return id <= strings_; };
    if (rec->type == IOT_REC_SYSCALL) {
      if (rec->size != sizeof(iot_syscall)) __builtin_trap();
      const auto* s = reinterpret_cast<const iot_syscall*>(rec);
      if (!id_ok(s->path_id) || !id_ok(s->path2_id) || s->op > IOT_OP_MAX) __builtin_trap();
    } else if (rec->type == IOT_REC_PROC) {
      const auto* p = reinterpret_cast<const iot_proc*>(rec);
      if (!id_ok(p->path_id) || p->comm[15] != 0) __builtin_trap();
    } else if (rec->type == IOT_REC_FD_SNAPSHOT) {
      if (!id_ok(reinterpret_cast<const iot_fd_snapshot*>(rec)->path_id)) __builtin_trap();
    } else if (rec->type == IOT_REC_BLOCK) {
      if (reinterpret_cast<const iot_block*>(rec)->comm[15] != 0) __builtin_trap();
    } else if (rec->type == IOT_REC_IOVEC) {
      const auto* v = reinterpret_cast<const iot_iovec*>(rec);
      if (rec->size != sizeof(iot_iovec) + 8u * v->captured || v->captured > IOT_IOVEC_MAX) __builtin_trap();
    }
    Count(rec);
    return Status::Ok();
  }
  void SetClock(const nlohmann::json&) override {}

 private:
  uint32_t strings_ = 0;
};

// Byte 0 chooses options (strict; a pid; one or two inputs, split at the first NUL byte).
inline int Run(ImportFormat format, const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  uint8_t opts = data[0];
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  ImportOptions o;
  o.strict = opts & 1;
  o.pid = (opts & 2) ? 4242 : 0;
  o.dev = (opts & 4) ? (259u << 20) : 0;
  std::vector<LineReader> inputs;
  size_t nul = text.find('\0');
  if ((opts & 8) && nul != std::string_view::npos) {
    inputs.push_back(LineReader::FromMemory(text.substr(0, nul), "log.100"));
    inputs.push_back(LineReader::FromMemory(text.substr(nul + 1), "log.101"));
  } else {
    inputs.push_back(LineReader::FromMemory(text, "input"));
  }
  CheckingSink sink;
  auto importer = MakeImporter(format, &sink, o);
  Status st = FeedImporter(importer.get(), &inputs);
  (void)st;
  (void)DetectFormat(text);
  return 0;
}

}  // namespace iotwin::interop::fuzz
