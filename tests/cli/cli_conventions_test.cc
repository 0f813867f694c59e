// Command-line conventions of iotwin and iotwin-workload (no BPF needed): sizes and durations
// with units, `help`, `-V`, a mistyped subcommand, errors prefixed with the subcommand.
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../unit/trace_builder.h"
#include "runtime_util.h"

namespace iotwin::test {
namespace {

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  return static_cast<bool>(out);
}

std::string SmallTrace(const TempDir& dir) {
  TraceBuilder t(FullCaptureMeta());
  uint64_t ts = 1'000'000'000ULL;
  t.ProcAt(IOT_PROC_START, ts, 500, 500, "app");
  t.Open(500, ts += 1000, "/data/a.bin", 3, 1, 10);
  for (int i = 0; i < 10; i++) t.Io(IOT_OP_PREAD64, 500, ts += 100'000'000, 1000, 3, 1, 10, 0, 4096, 4096);
  std::string path = dir / "t.iotwin";
  EXPECT_TRUE(t.WriteFile(path, {{"stop_reason", "exited"}, {"exit_status", 0}}).ok());
  return path;
}

TEST(CliConventions, DurationsWithUnitsMeanWhatTheySay) {
  TempDir dir;
  std::string trace = SmallTrace(dir);
  // Calls every 100 ms: --from 0.5s and --from 500ms keep the same records.
  RunResult seconds = test::Run({IotwinBin(), "report", trace, "--json", "--from", "0.5"});
  RunResult ms = test::Run({IotwinBin(), "report", trace, "--json", "--from", "500ms"});
  ASSERT_EQ(seconds.exit_code, 0) << seconds.err;
  ASSERT_EQ(ms.exit_code, 0) << ms.err;
  EXPECT_EQ(nlohmann::json::parse(seconds.out)["totals"], nlohmann::json::parse(ms.out)["totals"]);
  RunResult all = test::Run({IotwinBin(), "report", trace, "--json"});
  EXPECT_NE(nlohmann::json::parse(all.out)["totals"], nlohmann::json::parse(ms.out)["totals"]);
}

TEST(CliConventions, ABadUnitIsAnErrorNamingTheSubcommandOptionAndExamples) {
  TempDir dir;
  RunResult r = test::Run({IotwinBin(), "report", SmallTrace(dir), "--from", "4x"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("iotwin report: --from: '4x' is not a duration", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("500ms"), std::string::npos) << r.err;
  // A negative count is refused, not wrapped into "every row".
  RunResult top = test::Run({IotwinBin(), "report", SmallTrace(dir), "--top", "-1"});
  EXPECT_EQ(top.exit_code, 2);
  EXPECT_EQ(top.err.rfind("iotwin report: --top: '-1' is not a count", 0), 0u) << top.err;
}

// The subcommands `iotwin --help` lists, and the options of `iotwin SUB --help` whose value CLI11
// types as a number (INT, UINT, FLOAT, with or without a unit or range after the colon).
std::vector<std::string> HelpSubcommands() {
  RunResult help = test::Run({IotwinBin(), "--help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  std::vector<std::string> subs;
  std::string text = help.out.substr(help.out.find("Subcommands:"));
  const std::regex line("\n  ([a-z]+) ");
  for (std::sregex_iterator it(text.begin(), text.end(), line), end; it != end; ++it) {
    if ((*it)[1] != "help") subs.push_back((*it)[1]);
  }
  return subs;
}

std::vector<std::string> NumericOptions(const std::string& sub) {
  RunResult help = test::Run({IotwinBin(), sub, "--help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  std::vector<std::string> options;
  std::regex numeric("\n  (?:-[a-zA-Z],)?(--[a-z0-9-]+) (?:INT|UINT|FLOAT)\\b");
  for (std::sregex_iterator it(help.out.begin(), help.out.end(), numeric), end; it != end; ++it) {
    options.push_back((*it)[1]);
  }
  return options;
}

// Not CLI11's "Could not convert: --amplify = x": the subcommand, the option, what it takes.
TEST(CliConventions, EveryNumericOptionRefusesAWordNamingTheOptionAndAnExample) {
  size_t checked = 0;
  for (const std::string& sub : HelpSubcommands()) {
    for (const std::string& option : NumericOptions(sub)) {
      RunResult r = test::Run({IotwinBin(), sub, option, "x"});
      EXPECT_EQ(r.exit_code, 2) << sub << " " << option;
      EXPECT_EQ(r.err.rfind("iotwin " + sub + ": " + option + ": 'x' is not ", 0), 0u) << r.err;
      EXPECT_NE(r.err.find("example"), std::string::npos) << r.err;
      checked++;
    }
  }
  EXPECT_GE(checked, 15u) << "the help texts list fewer numeric options than there are";
  // A value that is a number but not a whole one of the option's unit shows examples too.
  RunResult ring = test::Run({IotwinBin(), "record", "--ring-mb", "4k", "-o", "x", "--", "true"});
  EXPECT_EQ(ring.exit_code, 2);
  EXPECT_EQ(ring.err.rfind("iotwin record: --ring-mb: '4k' is not a whole number of MiB; "
                           "examples: ", 0), 0u) << ring.err;
  RunResult poll = test::Run({IotwinBin(), "record", "--poll-ms", "500us", "-o", "x", "--", "true"});
  EXPECT_EQ(poll.exit_code, 2);
  EXPECT_EQ(poll.err.rfind("iotwin record: --poll-ms: '500us' is not a whole number of ms; "
                           "examples: ", 0), 0u) << poll.err;
}

// An option with a fixed set of words lists them (and --help, the man page and completion do).
TEST(CliConventions, AWordOutsideAnOptionsChoicesListsThem) {
  RunResult r = test::Run({IotwinBin(), "record", "--on-failure", "nope", "-o", "x", "--", "true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("iotwin record: --on-failure: 'nope' is not one of: terminate, kill, leave",
                        0), 0u) << r.err;
  RunResult pace = test::Run({IotwinBin(), "replay", "t.iotwin", "--pace", "nope"});
  EXPECT_EQ(pace.exit_code, 2);
  EXPECT_EQ(pace.err.rfind("iotwin replay: --pace: 'nope' is not one of: original, gaps, fast", 0),
            0u) << pace.err;
  RunResult help = test::Run({IotwinBin(), "replay", "--help"});
  EXPECT_NE(help.out.find("{original,gaps,fast}"), std::string::npos) << help.out;
  TempDir dir;
  RunResult op = test::Run({IotwinBin(), "report", SmallTrace(dir), "--filter", "op=nope"});
  EXPECT_EQ(op.exit_code, 2);
  EXPECT_EQ(op.err.rfind("iotwin report: --filter op=nope: unknown operation", 0), 0u) << op.err;
  EXPECT_NE(op.err.find("e.g. op=pread64"), std::string::npos) << op.err;
}

TEST(CliConventions, WorkloadSizesTakeUnits) {
  TempDir dir;
  RunResult r = test::Run({WorkloadBin(), "micro", "--size", "4k", "--file-mb", "1M", "--ops", "4",
                     "--dir", dir.path()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string last = r.out.substr(r.out.rfind('\n', r.out.size() - 2) + 1);  // the JSON summary line
  auto j = nlohmann::json::parse(last);
  EXPECT_EQ(j["size"], 4096);
  RunResult bad = test::Run({WorkloadBin(), "micro", "--size", "4q", "--dir", dir.path()});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--size: '4q' is not a size"), std::string::npos) << bad.err;
}

TEST(CliConventions, MistypedSubcommandSuggestsTheNearestOne) {
  RunResult r = test::Run({IotwinBin(), "reprot", "x"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown subcommand 'reprot' (did you mean 'report'?)"), std::string::npos)
      << r.err;
  RunResult far = test::Run({IotwinBin(), "frobnicate"});
  EXPECT_EQ(far.exit_code, 2);
  EXPECT_NE(far.err.find("unknown subcommand 'frobnicate'"), std::string::npos) << far.err;
  EXPECT_EQ(far.err.find("did you mean"), std::string::npos) << far.err;
}

TEST(CliConventions, HelpAndVersion) {
  RunResult help = test::Run({IotwinBin(), "help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("Usage: iotwin [OPTIONS] SUBCOMMAND"), std::string::npos) << help.out;
  RunResult help_dump = test::Run({IotwinBin(), "help", "dump"});
  EXPECT_EQ(help_dump.exit_code, 0);
  EXPECT_NE(help_dump.out.find("Usage: iotwin dump"), std::string::npos) << help_dump.out;
  RunResult version = test::Run({IotwinBin(), "-V"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out.rfind("iotwin ", 0), 0u) << version.out;
}

TEST(CliConventions, AnImportThatYieldsNoRecordFailsAndLeavesNoTrace) {
  TempDir dir;
  std::string csv = dir / "table.csv", calls = dir / "calls.txt", out = dir / "out.iotwin";
  ASSERT_TRUE(WriteFile(csv, "a,b,c\n1,2,3\n"));
  RunResult r = test::Run({IotwinBin(), "import", "--format", "strace", "-o", out, csv});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no record imported as strace from 2 lines (2 unknown"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(csv + ":1 (byte 0)"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(out + ".partial"));
  // Recognised lines, but no file I/O among them.
  ASSERT_TRUE(WriteFile(calls, "1234 getpid() = 1234\n1234 exit_group(0) = ?\n"));
  r = test::Run({IotwinBin(), "import", "--format", "strace", "-o", out, calls});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("did no file I/O"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(CliConventions, DumpOfATruncatedTraceFailsUnlessSalvaging) {
  TempDir dir;
  std::string trace = SmallTrace(dir);
  EXPECT_EQ(test::Run({IotwinBin(), "dump", trace}).exit_code, 0);
  // Cut off the footer: the records' chunk stays whole, the index and summary go.
  auto size = std::filesystem::file_size(trace);
  std::filesystem::resize_file(trace, size - 16);
  RunResult r = test::Run({IotwinBin(), "dump", trace});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--salvage"), std::string::npos) << r.err;
  RunResult salvaged = test::Run({IotwinBin(), "dump", "--salvage", trace});
  EXPECT_EQ(salvaged.exit_code, 0) << salvaged.err;
  // Every line on stderr says who speaks, the damage too.
  for (const std::string& err : {r.err, salvaged.err}) {
    std::istringstream lines(err);
    std::string line;
    while (std::getline(lines, line)) EXPECT_EQ(line.rfind("iotwin dump: ", 0), 0u) << err;
  }
  EXPECT_NE(salvaged.err.find("iotwin dump: truncated: "), std::string::npos) << salvaged.err;
  EXPECT_NE(salvaged.out.find("records syscall"), std::string::npos) << salvaged.out;
}

// The commands that read what a truncated trace holds say so, on stderr and in their JSON.
TEST(CliConventions, LayersOfATruncatedTraceSaysItIsTruncated) {
  TempDir dir;
  std::string trace = SmallTrace(dir);
  std::filesystem::resize_file(trace, std::filesystem::file_size(trace) - 16);
  RunResult text = test::Run({IotwinBin(), "layers", trace});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.err.find("iotwin layers: warning: "), std::string::npos) << text.err;
  EXPECT_NE(text.err.find("truncated"), std::string::npos) << text.err;
  EXPECT_NE(text.out.find("  damage  "), std::string::npos) << text.out;
  RunResult json = test::Run({IotwinBin(), "layers", "--json", trace});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(nlohmann::json::parse(json.out).value("damage", "").find("truncated"), std::string::npos);
}

TEST(CliConventions, CompareWarnsOfATruncatedTraceAndRefusesTwoStandardInputs) {
  TempDir dir;
  std::string trace = SmallTrace(dir), cut = dir / "cut.iotwin";
  std::filesystem::copy_file(trace, cut);
  std::filesystem::resize_file(cut, std::filesystem::file_size(cut) - 16);
  RunResult r = test::Run({IotwinBin(), "compare", trace, cut});
  EXPECT_NE(r.err.find("iotwin compare: warning: the replay is damaged"), std::string::npos)
      << r.err;
  RunResult both = test::Run({"/bin/sh", "-c", "\"$0\" compare - - < \"$1\"", IotwinBin(), trace});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("only one of the two traces"), std::string::npos) << both.err;
  RunResult rec = test::Run({IotwinBin(), "replay", trace, "--root", dir / "root", "--record", "-"});
  EXPECT_EQ(rec.exit_code, 2);
  EXPECT_NE(rec.err.find("--record -: the replay's trace needs a file"), std::string::npos)
      << rec.err;
}

TEST(CliConventions, AnonymizeMakesAKeyWhenAskedAndSaysHowWithoutOne) {
  TempDir dir;
  std::string trace = SmallTrace(dir), key = dir / "key", out = dir / "anon.iotwin";
  RunResult none = test::Run({IotwinBin(), "anonymize", trace, "-o", out});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("iotwin anonymize: --key FILE is required; make one with `iotwin "
                          "anonymize --new-key FILE`"),
            std::string::npos)
      << none.err;
  RunResult made = test::Run({IotwinBin(), "anonymize", "--new-key", key});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  EXPECT_EQ(std::filesystem::file_size(key), 32u);
  EXPECT_EQ(std::filesystem::status(key).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  EXPECT_EQ(test::Run({IotwinBin(), "anonymize", "--new-key", key}).exit_code, 2);
  RunResult used = test::Run({IotwinBin(), "anonymize", trace, "-o", out, "--key", key});
  EXPECT_EQ(used.exit_code, 0) << used.err;
  EXPECT_TRUE(std::filesystem::exists(out));
}

TEST(CliConventions, ADashReadsTheTraceFromStandardInput) {
  TempDir dir;
  std::string trace = SmallTrace(dir);
  RunResult file = test::Run({IotwinBin(), "report", "--json", trace});
  // Through a pipe (copied to a temporary file) and as a redirected file.
  RunResult piped = test::Run({"/bin/sh", "-c", "cat \"$1\" | \"$0\" report --json -", IotwinBin(), trace});
  RunResult redirected = test::Run({"/bin/sh", "-c", "\"$0\" report --json - < \"$1\"", IotwinBin(), trace});
  ASSERT_EQ(file.exit_code, 0) << file.err;
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  ASSERT_EQ(redirected.exit_code, 0) << redirected.err;
  EXPECT_EQ(nlohmann::json::parse(piped.out)["totals"], nlohmann::json::parse(file.out)["totals"]);
  EXPECT_EQ(nlohmann::json::parse(redirected.out)["totals"], nlohmann::json::parse(file.out)["totals"]);
  RunResult dump = test::Run({"/bin/sh", "-c", "cat \"$1\" | \"$0\" dump -", IotwinBin(), trace});
  EXPECT_EQ(dump.exit_code, 0) << dump.err;
  EXPECT_NE(dump.out.find("records syscall 11"), std::string::npos) << dump.out;
  RunResult empty = test::Run({"/bin/sh", "-c", "printf x | \"$0\" report -", IotwinBin()});
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_NE(empty.err.find("<stdin>: byte 0: not an iotwin trace"), std::string::npos) << empty.err;
}

// `-o -` of import and anonymize, `report --html -` and `export --chrome -` write to standard
// output the bytes they would write to a file, never a file named "-"; a failure writes nothing
// there.
TEST(CliConventions, ADashOutputWritesStandardOutputNeverAFileNamedDash) {
  TempDir dir;
  std::string trace = SmallTrace(dir), key = dir / "key", anon = dir / "anon.iotwin";
  std::string log = dir / "log.strace", imported = dir / "imported.iotwin";
  auto in_dir = [&](const std::string& command) {
    return test::Run({"/bin/sh", "-c", "cd \"$1\" && " + command, IotwinBin(), dir.path()});
  };
  ASSERT_EQ(test::Run({IotwinBin(), "anonymize", "--new-key", key}).exit_code, 0);
  ASSERT_EQ(in_dir("\"$0\" anonymize t.iotwin -o anon.iotwin --key key").exit_code, 0);
  ASSERT_TRUE(WriteFile(log, "100 openat(AT_FDCWD, \"/d/f\", O_RDONLY) = 3\n"
                             "100 pread64(3, \"\"..., 4096, 0) = 4096\n100 close(3) = 0\n"));
  ASSERT_EQ(in_dir("\"$0\" import log.strace -o imported.iotwin").exit_code, 0);
  auto bytes_of = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  RunResult a = in_dir("\"$0\" anonymize t.iotwin -o - --key key");
  EXPECT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, bytes_of(anon)) << "the same keyed trace as to a file";
  RunResult i = in_dir("\"$0\" import log.strace -o -");
  EXPECT_EQ(i.exit_code, 0) << i.err;
  EXPECT_EQ(i.out, bytes_of(imported));
  RunResult h = in_dir("\"$0\" report t.iotwin --html -");
  EXPECT_EQ(h.exit_code, 0) << h.err;
  EXPECT_EQ(h.out.rfind("<!DOCTYPE html>", 0), 0u) << "only the page: " << h.out.substr(0, 40);
  RunResult chrome = in_dir("\"$0\" export t.iotwin --chrome -");
  EXPECT_EQ(chrome.exit_code, 0) << chrome.err;
  EXPECT_TRUE(nlohmann::json::accept(chrome.out)) << chrome.out.substr(0, 80);
  RunResult fio = in_dir("\"$0\" export t.iotwin --fio -");
  EXPECT_EQ(fio.exit_code, 2);
  EXPECT_NE(fio.err.find("--fio writes a job directory"), std::string::npos) << fio.err;
  RunResult failed = in_dir("printf 'not strace\\n' | \"$0\" import - -o - --format strace");
  EXPECT_EQ(failed.exit_code, 2);
  EXPECT_EQ(failed.out, "");
  RunResult both = in_dir("\"$0\" import log.strace -o - --json");
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("no --json there"), std::string::npos) << both.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "-"));
}

TEST(CliConventions, DumpImportAndAnonymizePrintVersionedJson) {
  TempDir dir;
  std::string trace = SmallTrace(dir), key = dir / "key";
  RunResult dump = test::Run({IotwinBin(), "dump", "--json", trace});
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  auto d = nlohmann::json::parse(dump.out);
  EXPECT_EQ(d["schema"], "iotwin-dump/1");
  EXPECT_EQ(d["records"]["syscall"], 11);
  EXPECT_EQ(d["whole"], true);

  std::string strace = dir / "app.strace";
  ASSERT_TRUE(WriteFile(strace, "100 openat(AT_FDCWD, \"/data/x\", O_RDONLY) = 3\n"
                                "100 read(3, \"\"..., 4096) = 4096\n"
                                "100 close(3) = 0\n"));
  RunResult imported = test::Run({IotwinBin(), "import", "--json", "-o", dir / "i.iotwin", strace});
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  auto i = nlohmann::json::parse(imported.out);
  EXPECT_EQ(i["schema"], "iotwin-import/1");
  EXPECT_EQ(i["format"], "strace");
  EXPECT_EQ(i["records"]["syscall"], 3) << imported.out;
  EXPECT_EQ(i["stats"]["lines"], 3) << imported.out;

  ASSERT_EQ(test::Run({IotwinBin(), "anonymize", "--new-key", key}).exit_code, 0);
  RunResult anon = test::Run({IotwinBin(), "anonymize", "--json", trace, "-o", dir / "a.iotwin",
                              "--key", key});
  ASSERT_EQ(anon.exit_code, 0) << anon.err;
  auto a = nlohmann::json::parse(anon.out);
  EXPECT_EQ(a["schema"], "iotwin-anonymize/1");
  EXPECT_GT(a["strings"].get<uint64_t>(), 0u);
}

// The subcommands whose --json is documented in their references name their schema too.
TEST(CliConventions, ReportLayersCompareReplayAndCheckNameTheirJsonSchema) {
  TempDir dir;
  std::string trace = SmallTrace(dir);
  const std::vector<std::pair<std::string, std::vector<std::string>>> runs = {
      {"iotwin-report/1", {IotwinBin(), "report", "--json", trace}},
      {"iotwin-layers/1", {IotwinBin(), "layers", "--json", trace}},
      {"iotwin-compare/1", {IotwinBin(), "compare", "--json", "--no-progress", trace, trace}},
      {"iotwin-replay/1",
       {IotwinBin(), "replay", "--json", "-q", "--pace", "fast", trace, "--root", dir / "root"}},
      {"iotwin-check/1", {IotwinBin(), "check", "--json"}},
  };
  for (const auto& [schema, argv] : runs) {
    RunResult r = test::Run(argv, 120);
    EXPECT_EQ(r.exit_code, 0) << argv[1] << ": " << r.err;
    ASSERT_TRUE(nlohmann::json::accept(r.out)) << argv[1] << ": " << r.out.substr(0, 200);
    EXPECT_EQ(nlohmann::json::parse(r.out).value("schema", ""), schema) << argv[1];
  }
}

TEST(CliConventions, ExportPrintsVersionedJsonOfEachOutput) {
  TempDir dir;
  std::string trace = SmallTrace(dir);
  RunResult r = test::Run({IotwinBin(), "export", trace, "--json", "--fio", dir / "fio", "--csv",
                           dir / "csv", "--chrome", dir / "c.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schema"], "iotwin-export/1");
  EXPECT_EQ(j["fio"]["reads"], 10) << r.out;
  EXPECT_EQ(j["csv"]["rows"]["syscalls"], 11) << r.out;
  EXPECT_GT(j["chrome"]["events"].get<uint64_t>(), 0u);
  EXPECT_FALSE(j.contains("jsonl"));
}

}  // namespace
}  // namespace iotwin::test
