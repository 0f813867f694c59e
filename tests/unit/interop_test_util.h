// Helpers for the interop unit tests: import test data into memory, write synthetic traces.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "format/trace_reader.h"
#include "format/trace_writer.h"
#include "interop/importer.h"
#include "interop/line_reader.h"
#include "interop/record_sink.h"
#include "temp_dir.h"

namespace iotwin::interop::testing {

inline std::string DataPath(const std::string& name) {
  return std::string(IOTWIN_TEST_DATA_DIR) + "/interop/" + name;
}

struct ImportOutcome {
  MemorySink sink;
  ImportStats stats;
  Status status;
};

inline void ImportInto(ImportOutcome* out, ImportFormat format, const std::vector<std::string>& paths,
                       ImportOptions options = {}) {
  auto importer = MakeImporter(format, &out->sink, options);
  std::vector<LineReader> readers;
  for (const auto& p : paths) {
    auto r = LineReader::Open(p);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    readers.push_back(std::move(*r));
  }
  out->status = FeedImporter(importer.get(), &readers);
  out->stats = importer->stats();
}

inline void ImportText(ImportOutcome* out, ImportFormat format, std::string_view text,
                       ImportOptions options = {}) {
  auto importer = MakeImporter(format, &out->sink, options);
  std::vector<LineReader> readers;
  readers.push_back(LineReader::FromMemory(text, "<test>"));
  out->status = FeedImporter(importer.get(), &readers);
  out->stats = importer->stats();
}

// A scratch directory removed at the end of the test (also when an assertion fails).
using ScratchDir = ::iotwin::test::TempDir;

inline std::string ReadFile(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return {};
  std::string s;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  std::fclose(f);
  return s;
}

// Reads every record of a trace (copies), with its string table.
struct TraceContents {
  nlohmann::json meta;
  std::optional<nlohmann::json> summary;
  std::vector<std::vector<uint8_t>> records;
  std::map<uint32_t, std::string> strings;
  template <typename T>
  std::vector<T> Of(uint16_t type) const {
    std::vector<T> out;
    for (const auto& r : records) {
      if (reinterpret_cast<const iot_rec_hdr*>(r.data())->type != type) continue;
      T t{};
      std::memcpy(&t, r.data(), std::min(sizeof(T), r.size()));
      out.push_back(t);
    }
    return out;
  }
};

inline TraceContents ReadTrace(const std::string& path) {
  TraceContents c;
  auto reader = TraceReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status().ToString();
  if (!reader.ok()) return c;
  c.meta = (*reader)->meta();
  for (;;) {
    auto next = (*reader)->Next();
    EXPECT_TRUE(next.ok()) << next.status().ToString();
    if (!next.ok() || !*next) break;
    const iot_rec_hdr* h = *next;
    if (h->type == IOT_REC_STRING) {
      const auto* s = reinterpret_cast<const iot_string*>(h);
      c.strings[s->id] = std::string((*reader)->String(s->id));
      continue;
    }
    const auto* p = reinterpret_cast<const uint8_t*>(h);
    c.records.emplace_back(p, p + h->size);
  }
  c.summary = (*reader)->summary();
  return c;
}

}  // namespace iotwin::interop::testing

namespace iotwin::interop::testing {

// Builds small synthetic traces record by record.
class TraceBuilder {
 public:
  explicit TraceBuilder(const std::string& path, nlohmann::json meta = nlohmann::json::object()) {
    auto w = TraceWriter::Create(path, meta);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    if (w.ok()) w_ = std::move(*w);
  }
  uint32_t Str(std::string_view s) {
    auto id = w_->InternString(s);
    EXPECT_TRUE(id.ok());
    return id.ok() ? *id : 0;
  }
  // The returned record may be adjusted until the next call to the builder.
  iot_syscall& Sys(uint16_t op, uint64_t ts, uint32_t tgid, uint32_t tid, int32_t fd, int64_t ret) {
    Flush();
    iot_syscall s{};
    InitRecord(&s, IOT_REC_SYSCALL);
    s.op = op;
    s.ts = ts;
    s.dur = 1000;
    s.tgid = tgid;
    s.tid = tid;
    s.fd = fd;
    s.fd2 = -1;
    s.ret = ret;
    s.ftype = 8;
    pending_sys_ = s;
    has_pending_ = true;
    return pending_sys_;
  }
  void Flush() {
    if (has_pending_) {
      EXPECT_TRUE(w_->Append(pending_sys_).ok());
    }
    has_pending_ = false;
  }
  template <typename T>
  void Add(const T& rec) {
    Flush();
    EXPECT_TRUE(w_->Append(rec).ok());
  }
  iot_block Block(uint16_t phase, uint64_t ts, uint32_t dev, uint64_t sector, uint32_t bytes,
                  uint32_t flags, uint64_t rq_id, uint32_t tid = 0) {
    iot_block b{};
    InitRecord(&b, IOT_REC_BLOCK);
    b.phase = phase;
    b.ts = ts;
    b.dev = dev;
    b.sector = sector;
    b.bytes = bytes;
    b.nr_sector = bytes / 512;
    b.flags = flags;
    b.rq_id = rq_id;
    b.tid = tid;
    b.tgid = tid;
    return b;
  }
  iot_proc Proc(uint16_t kind, uint64_t ts, uint32_t tgid, uint32_t tid, std::string_view comm = {},
                uint32_t path_id = 0) {
    iot_proc p{};
    InitRecord(&p, IOT_REC_PROC);
    p.kind = kind;
    p.ts = ts;
    p.tgid = tgid;
    p.tid = tid;
    p.path_id = path_id;
    std::memcpy(p.comm, comm.data(), std::min(comm.size(), sizeof p.comm - 1));
    return p;
  }
  void Finish(nlohmann::json summary = nlohmann::json::object()) {
    Flush();
    EXPECT_TRUE(w_->Finish(summary).ok());
  }

 private:
  std::unique_ptr<TraceWriter> w_;
  iot_syscall pending_sys_{};
  bool has_pending_ = false;
};

inline std::string ReplaceAll(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) {
    s.replace(pos, from.size(), to);
  }
  return s;
}

}  // namespace iotwin::interop::testing
