// The writer's string budget (TraceWriterOptions::max_string_bytes, max_strings): a traced
// command that names a million distinct long paths neither grows the writer without bound nor
// makes its own trace unreadable (docs/security.md, "Memory").
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "format/records.h"
#include "format/trace_reader.h"
#include "format/trace_writer.h"
#include "model/trace_model.h"

namespace iotwin {
namespace {

class TraceStringBudgetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/iotwin-budget-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/t.iotwin";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_, path_;
};

// Resident memory of this process, from /proc/self/status (0 when unknown).
uint64_t ResidentBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

iot_syscall Stat(uint32_t path_id, uint64_t i) {
  iot_syscall s{};
  InitRecord(&s, IOT_REC_SYSCALL);
  s.op = IOT_OP_STAT;
  s.ts = 1'000'000 + i * 1000;
  s.dur = 500;
  s.tgid = s.tid = 100;
  s.ret = -2;
  s.fd = -100;
  s.fd2 = -1;
  s.path_id = path_id;
  return s;
}

// Reads every record; returns the STRING records' total bytes and count through the pointers.
Status ReadAll(const std::string& path, uint64_t* string_bytes, uint64_t* strings) {
  auto r = TraceReader::Open(path);
  if (!r.ok()) return r.status();
  for (;;) {
    auto n = (*r)->Next();
    if (!n.ok()) return n.status();
    if (!*n) return Status::Ok();
    if ((*n)->type == IOT_REC_STRING) {
      *string_bytes += As<iot_string>(*n).len;
      (*strings)++;
    }
  }
}

TEST_F(TraceStringBudgetTest, DefaultBudgetFitsTheReaderAndBoundsTheWriter) {
  // The worst a writer can put in a trace stays within what every reader accepts.
  const TraceWriterOptions w;
  const TraceReaderOptions r;
  const uint64_t bounded_name = TraceWriter::kBoundedPrefix + 64;
  EXPECT_LT(w.max_string_bytes + uint64_t{w.max_strings} * bounded_name, r.max_string_bytes);

  // 300,000 distinct 4000-byte names (1.2 GB, past the reader's 1 GiB): the recording.
  constexpr int kNames = 300'000;
  const uint64_t rss_before = ResidentBytes();
  uint64_t rss_after = 0;
  {
    auto writer = TraceWriter::Create(path_, {{"tool", "iotwin-test"}});
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    std::string name(4000, 'x');
    name[0] = '/';
    for (int i = 0; i < kNames; i++) {
      const int len = std::snprintf(name.data() + 1, 12, "%010d", i);
      name[1 + len] = 'x';  // snprintf's NUL
      auto id = (*writer)->InternString(name);
      ASSERT_TRUE(id.ok()) << id.status().ToString();
      ASSERT_TRUE((*writer)->Append(Stat(*id, i)).ok());
    }
    EXPECT_GT((*writer)->strings_over_budget().digested, 0u);
    ASSERT_TRUE((*writer)->Finish(nlohmann::json::object()).ok());
    rss_after = ResidentBytes();
  }
  // The writer kept a digest per name, not the names: far below the 1.2 GB it was given.
  EXPECT_LT(rss_after, rss_before + (256u << 20)) << rss_before << " -> " << rss_after;

  uint64_t string_bytes = 0, strings = 0;
  Status read = ReadAll(path_, &string_bytes, &strings);
  ASSERT_TRUE(read.ok()) << read.ToString();
  EXPECT_EQ(strings, static_cast<uint64_t>(kNames));  // each name kept its own id
  EXPECT_LE(string_bytes, TraceWriterOptions{}.max_string_bytes +
                              kNames * (TraceWriter::kBoundedPrefix + 64));

  auto reader = TraceReader::Open(path_);
  ASSERT_TRUE(reader.ok());
  while (true) {
    auto n = (*reader)->Next();
    ASSERT_TRUE(n.ok());
    if (!*n) break;
  }
  ASSERT_TRUE((*reader)->summary().has_value());
  const nlohmann::json& over = (*(*reader)->summary())["strings_over_budget"];
  ASSERT_TRUE(over.is_object()) << (*reader)->summary()->dump();
  EXPECT_GT(over["digested"].get<uint64_t>(), 200'000u);
  EXPECT_EQ(over["shared"].get<uint64_t>(), 0u);

  // The model takes the names kept in full as paths, the bounded ones as names it cannot use.
  auto model = model::LoadTraceModel(path_);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->stats().syscalls, static_cast<uint64_t>(kNames));
  EXPECT_GT((*model)->stats().skipped_by_reason[static_cast<size_t>(model::Skip::kUnknownPath)],
            200'000u);
}

TEST_F(TraceStringBudgetTest, PastTheCountNewNamesShareOneId) {
  TraceWriterOptions o;
  o.max_string_bytes = 4096;
  o.max_strings = 10;
  auto writer = TraceWriter::Create(path_, {{"tool", "iotwin-test"}}, o);
  ASSERT_TRUE(writer.ok());
  std::vector<uint32_t> ids;
  for (int i = 0; i < 30; i++) {
    auto id = (*writer)->InternString("/dir/" + std::to_string(i) + std::string(1000, 'n'));
    ASSERT_TRUE(id.ok());
    ids.push_back(*id);
  }
  // Names seen before keep their id, over budget or not.
  EXPECT_EQ(*(*writer)->InternString("/dir/0" + std::string(1000, 'n')), ids[0]);
  EXPECT_EQ(*(*writer)->InternString("/dir/7" + std::string(1000, 'n')), ids[7]);
  EXPECT_EQ(std::set<uint32_t>(ids.begin(), ids.begin() + 10).size(), 10u);
  for (int i = 11; i < 30; i++) EXPECT_EQ(ids[i], ids[10]) << i;
  EXPECT_EQ((*writer)->strings_over_budget().digested, 6u);  // 4 names fit 4096 bytes in full
  EXPECT_EQ((*writer)->strings_over_budget().shared, 20u);
  ASSERT_TRUE((*writer)->Finish(nlohmann::json::object()).ok());

  auto reader = TraceReader::Open(path_);
  ASSERT_TRUE(reader.ok());
  uint64_t truncated = 0, strings = 0;
  for (;;) {
    auto n = (*reader)->Next();
    ASSERT_TRUE(n.ok());
    if (!*n) break;
    if ((*n)->type != IOT_REC_STRING) continue;
    strings++;
    const auto& s = As<iot_string>(*n);
    if (s.flags & IOT_STRF_TRUNCATED) {
      truncated++;
      EXPECT_LE(s.len, TraceWriter::kBoundedPrefix + 64);
    }
  }
  EXPECT_EQ(strings, 11u);
  EXPECT_EQ(truncated, 7u);  // 6 digested and the shared one
}

}  // namespace
}  // namespace iotwin
