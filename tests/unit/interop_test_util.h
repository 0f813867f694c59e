// Helpers for the interop unit tests: import test data into memory, read traces back. Synthetic
// traces are built with test::TraceBuilder (trace_builder.h).
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
#include "trace_builder.h"

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

inline std::string ReplaceAll(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) {
    s.replace(pos, from.size(), to);
  }
  return s;
}

}  // namespace iotwin::interop::testing
