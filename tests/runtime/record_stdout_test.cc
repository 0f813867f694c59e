// `iotwin record -o -` (root + BPF): the trace streams through standard output while the traced
// command's own output goes elsewhere; --json and what standard output cannot carry. The other
// command-line conventions need no BPF: tests/cli/cli_conventions_test.cc.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime_util.h"

namespace iotwin::test {
namespace {

TEST(CliConventions, RecordToADashStreamsTheTraceAndKeepsTheCommandsOutputApart) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  std::string trace = dir / "piped.iotwin", data = dir / "data.bin";
  // The traced command writes a file and prints to its standard output; the trace goes through
  // a pipe into cat.
  // What the command prints ("stdout-mark") is not in its arguments, which the trace holds.
  std::string command = "printf '%s-%s\\n' stdout mark; head -c 8192 /dev/zero > " + data;
  RunResult r = test::Run({"/bin/bash", "-o", "pipefail", "-c",
                           "\"$0\" record --no-status -o - -- /bin/sh -c \"$2\" | cat > \"$1\"",
                           IotwinBin(), trace, command});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("stdout-mark"), std::string::npos) << r.err;
  // One summary line at the end, without a terminal too.
  EXPECT_NE(r.err.find(" lost, "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" to standard output in "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("\033[K"), std::string::npos) << r.err;
  RunResult dump = test::Run({IotwinBin(), "dump", trace});
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  RunResult records = test::Run({IotwinBin(), "dump", "--records", trace});
  ASSERT_EQ(records.exit_code, 0) << records.err;
  EXPECT_NE(records.out.find(data), std::string::npos);
  EXPECT_EQ(records.out.find("stdout-mark"), std::string::npos);
  // --json: the summary as the last line of standard output; not with -o -.
  RunResult json = test::Run({IotwinBin(), "record", "--json", "-o", dir / "j.iotwin", "--", "true"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto j = nlohmann::json::parse(json.out.substr(json.out.rfind('{')));
  EXPECT_EQ(j["schema"], "iotwin-record/1");
  EXPECT_EQ(j["lost"], 0);
  EXPECT_GT(j["events"].get<uint64_t>(), 0u);
  EXPECT_EQ(test::Run({IotwinBin(), "record", "--json", "-o", "-", "--", "true"}).exit_code, 2);
  // Standard output that cannot carry a trace: a file opened for appending.
  RunResult append = test::Run({"/bin/sh", "-c", "\"$0\" record -o - -- true >> \"$1\"", IotwinBin(),
                                dir / "appended"});
  EXPECT_EQ(append.exit_code, 2);
  EXPECT_NE(append.err.find("standard output must be a pipe or a file"), std::string::npos)
      << append.err;
  RunResult tty_scope = test::Run({IotwinBin(), "record", "-o", "-", "--scope", "data", "--", "true"});
  EXPECT_EQ(tty_scope.exit_code, 2);
  EXPECT_NE(tty_scope.err.find("-o -: --scope"), std::string::npos) << tty_scope.err;
}

}  // namespace
}  // namespace iotwin::test
