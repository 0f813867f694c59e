// The data scope leaves out program images (model/program_images.h): files that execute and that
// no call names (the executable and loader execve maps). The report's streaming analysis and the
// trace model agree on which files they are; a file that is only read through faults stays in.
#include <string>

#include <gtest/gtest.h>

#include "analysis/trace_analysis.h"
#include "trace_builder.h"
#include "interop_test_util.h"
#include "model/program_images.h"
#include "model/trace_model.h"

namespace iotwin {
namespace {

constexpr uint32_t kDev = (254u << 20) | 0;
constexpr uint64_t kProgram = 100, kMappedData = 200, kNamedLibrary = 300;

iot_page_fault ExecFault(uint64_t ts, uint64_t ino, bool exec) {
  iot_page_fault f{};
  InitRecord(&f, IOT_REC_PAGE_FAULT);
  f.ts = ts;
  f.tgid = f.tid = 7;
  f.dev = kDev;
  f.ino = ino;
  f.flags = exec ? IOT_PFF_EXEC : 0;
  f.nr_pages = 1;
  return f;
}

// The program faults first as data (its headers), then executes; an unnamed file is only read;
// a library executes but an open named it.
test::TraceBuilder ExecTrace() {
  test::TraceBuilder t(test::FullCaptureMeta());
  t.ProcAt(IOT_PROC_START, 1'000'000'000, 7, 7, "app");
  t.Add(ExecFault(1'000'001'000, kProgram, false));
  t.Add(ExecFault(1'000'002'000, kProgram, true));
  t.Add(ExecFault(1'000'003'000, kMappedData, false));
  iot_syscall open = test::TraceBuilder::Sys(IOT_OP_OPENAT, 7, 1'000'004'000);
  open.path_id = t.Str("/opt/app/libx.so.1");
  open.dev = kDev;
  open.ino = kNamedLibrary;
  open.ftype = 8;
  open.ret = 3;
  t.Add(open);
  t.Add(ExecFault(1'000'005'000, kNamedLibrary, true));
  return t;
}

TEST(ProgramImages, ExecutedAndNeverNamed) {
  model::ProgramImages images;
  test::TraceBuilder t = ExecTrace();
  t.ForEach([&](const iot_rec_hdr* r) { images.Add(r); });
  EXPECT_EQ(images.Images(), (std::set<model::ProgramImages::Key>{{kDev, kProgram}}));
}

TEST(ProgramImages, TheDataScopeLeavesThemOutInTheReportAndTheModel) {
  interop::testing::ScratchDir dir;
  const std::string path = dir / "t.iotwin";
  ASSERT_TRUE(ExecTrace().WriteFile(path, {{"stop_reason", "exited"}}).ok());
  const model::Scope data = *model::Scope::Parse("data", {}, {});

  analysis::TraceAnalysisOptions o;
  o.analyzer.filter.scope = data;
  auto report = analysis::AnalyzeTraceFile(path, o);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  std::set<uint64_t> rows;
  for (const auto& f : report->model["files"]["rows"]) rows.insert(f["ino"].get<uint64_t>());
  EXPECT_FALSE(rows.contains(kProgram)) << report->model["files"].dump();
  EXPECT_TRUE(rows.contains(kMappedData)) << "read through faults only, never executed";
  EXPECT_EQ(report->model["scope"]["left_out"]["faults"].get<uint64_t>(), 3u)
      << "both of the program's faults (the first came before it executed) and the library's";

  model::ModelOptions mo;
  mo.scope = data;
  auto m = model::LoadTraceModel(path, mo);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  for (const model::FileInfo& f : (*m)->files()) {
    if (f.ino == kProgram || f.ino == kNamedLibrary) {
      EXPECT_TRUE(f.out_of_scope) << f.ino;
    } else if (f.ino == kMappedData) {
      EXPECT_FALSE(f.out_of_scope);
    }
  }
}

}  // namespace
}  // namespace iotwin
