// The data scope on resolved names: a program attached to with --pid (one descriptor inherited
// from before the attach) reads files by a relative path after chdir, through openat on a
// directory descriptor, a "shared library" and a /proc file (tests/progs/io_scope.cc). report
// --include, --exclude, --scope data and --filter file= keep exactly the files their globs name on
// the absolute paths, and the header says what the scope left out.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/fd.h"
#include "record_check.h"

namespace iotwin::test {
namespace {

constexpr uint64_t kRel = 10000, kDirfd = 20000, kInherited = 40000, kLib = 80000;

void WriteFile(const std::string& path, size_t bytes) {
  std::ofstream out(path, std::ios::binary);
  out << std::string(bytes, 's');
}

uint64_t Ino(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// One recording of io_scope, attached with --pid, shared by the tests (recording is slow).
struct ScopeTrace {
  std::string dir;  // canonical: the globs name absolute paths
  std::string trace;
  std::map<std::string, uint64_t> ino;  // by file name: rel, dirfd, inherited, lib
  std::string error;                    // empty when recorded
};

// Records io_scope in DIR/`name`, with `record_options` added to iotwin record.
ScopeTrace Record(const TempDir& tmp, const std::string& name,
                  const std::vector<std::string>& record_options = {}) {
  ScopeTrace s;
  s.dir = std::filesystem::canonical(tmp.path()).string() + "/" + name;
  std::filesystem::create_directories(s.dir + "/data");
  std::filesystem::create_directories(s.dir + "/lib");
  WriteFile(s.dir + "/data/rel.bin", kRel);
  WriteFile(s.dir + "/data/dirfd.bin", kDirfd);
  WriteFile(s.dir + "/data/inherited.bin", kInherited);
  WriteFile(s.dir + "/lib/libfake.so.1", kLib);
  s.ino = {{"rel", Ino(s.dir + "/data/rel.bin")},
           {"dirfd", Ino(s.dir + "/data/dirfd.bin")},
           {"inherited", Ino(s.dir + "/data/inherited.bin")},
           {"lib", Ino(s.dir + "/lib/libfake.so.1")}};
  s.trace = s.dir + "/t.iotwin";
  const std::string pidfile = s.dir + "/pid", go = s.dir + "/go";
  Spawned prog = Spawn({TestProg("io_scope"), pidfile, go, s.dir});
  if (!WaitForFile(pidfile)) {
    s.error = "io_scope published no pid";
    return s;
  }
  int pid = 0;
  std::ifstream(pidfile) >> pid;
  // record writes one byte to --ready-fd once the process is traced: descriptor 3, a FIFO.
  const std::string ready = s.dir + "/ready";
  if (mkfifo(ready.c_str(), 0600) != 0) {
    s.error = "mkfifo failed";
    return s;
  }
  std::vector<std::string> argv = {"/bin/sh", "-c", "exec \"$@\" 3>\"$0\"", ready, IotwinBin(),
                                   "record", "-o", s.trace, "--no-status", "--ready-fd", "3",
                                   "--pid", std::to_string(pid)};
  argv.insert(argv.end(), record_options.begin(), record_options.end());
  Spawned rec = Spawn(argv);
  {
    UniqueFd fifo(open(ready.c_str(), O_RDONLY | O_CLOEXEC));
    char byte = 0;
    if (!fifo.valid() || read(fifo.get(), &byte, 1) != 1) s.error = "record never said ready";
  }
  std::ofstream(go) << "go\n";
  RunResult pr = WaitSpawned(prog);
  RunResult rr = WaitSpawned(rec, 30);
  if (pr.exit_code != 0) s.error += "io_scope: " + pr.err;
  if (rr.exit_code != 0) s.error += "record: " + rr.err;
  return s;
}

const ScopeTrace& Shared() {
  static TempDir* tmp = new TempDir;  // lives until the test binary exits
  static ScopeTrace s = Record(*tmp, "plain");
  return s;
}

struct Report {
  nlohmann::json model;
  std::string error;
  // Bytes read by system calls, per inode, of the files the report lists.
  std::map<uint64_t, uint64_t> read_by_ino;
  uint64_t read_bytes() const {
    uint64_t n = 0;
    for (const auto& [ino, b] : read_by_ino) n += b;
    return n;
  }
};

Report RunReport(const ScopeTrace& s, std::vector<std::string> options) {
  std::vector<std::string> argv = {IotwinBin(), "report", "--json", "--top", "0",
                                   "--no-progress", s.trace};
  argv.insert(argv.end(), options.begin(), options.end());
  RunResult r = Run(argv, 60);
  Report out;
  if (r.exit_code != 0) {
    out.error = r.err;
    return out;
  }
  out.model = nlohmann::json::parse(r.out, nullptr, false);
  if (out.model.is_discarded()) {
    out.error = "report printed no JSON";
    return out;
  }
  for (const auto& row : out.model["files"]["rows"]) {
    const uint64_t bytes = row["read"]["bytes"].get<uint64_t>();
    if (bytes > 0) out.read_by_ino[row["ino"].get<uint64_t>()] = bytes;
  }
  return out;
}

std::map<uint64_t, uint64_t> Expect(const ScopeTrace& s, std::set<std::string> files) {
  const std::map<std::string, uint64_t> bytes = {
      {"rel", kRel}, {"dirfd", kDirfd}, {"inherited", kInherited}, {"lib", kLib}};
  std::map<uint64_t, uint64_t> out;
  for (const std::string& f : files) out[s.ino.at(f)] = bytes.at(f);
  return out;
}

#define IOTWIN_SHARED_TRACE_OR_FAIL(s)        \
  IOTWIN_REQUIRE_BPF_OR_SKIP();               \
  const ScopeTrace& s = Shared();             \
  ASSERT_TRUE(s.error.empty()) << s.error

TEST(DataScope, WithoutAScopeEveryStorageFileIsCounted) {
  IOTWIN_SHARED_TRACE_OR_FAIL(s);
  Report r = RunReport(s, {});
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.read_by_ino, Expect(s, {"rel", "dirfd", "inherited", "lib"}));
  EXPECT_FALSE(r.model.contains("scope")) << "no scope asked for, none shown";
}

TEST(DataScope, IncludeMatchesRelativeDirfdAndInheritedNames) {
  IOTWIN_SHARED_TRACE_OR_FAIL(s);
  Report r = RunReport(s, {"--include", s.dir + "/data/*"});
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.read_by_ino, Expect(s, {"rel", "dirfd", "inherited"}));
  EXPECT_EQ(r.model["totals"]["read"]["syscall_bytes"].get<uint64_t>(),
            kRel + kDirfd + kInherited);
  ASSERT_TRUE(r.model.contains("scope"));
  EXPECT_EQ(r.model["scope"]["include"][0], s.dir + "/data/*");
  // The library's reads (and the open, close and the /proc file's calls) were left out.
  EXPECT_GE(r.model["scope"]["left_out"]["call_bytes"].get<uint64_t>(), kLib);
}

TEST(DataScope, ExcludeTakesOutARelativelyOpenedFile) {
  IOTWIN_SHARED_TRACE_OR_FAIL(s);
  Report r = RunReport(s, {"--exclude", "*/data/rel.bin"});
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.read_by_ino, Expect(s, {"dirfd", "inherited", "lib"}));
}

TEST(DataScope, DataPresetLeavesOutTheLibraryAndSaysSo) {
  IOTWIN_SHARED_TRACE_OR_FAIL(s);
  Report r = RunReport(s, {"--scope", "data"});
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.read_by_ino, Expect(s, {"rel", "dirfd", "inherited"}));
  ASSERT_TRUE(r.model.contains("scope"));
  EXPECT_EQ(r.model["scope"]["preset"], "data");
  EXPECT_NE(r.model["scope"]["description"].get<std::string>().find("shared libraries"),
            std::string::npos);
  EXPECT_GE(r.model["scope"]["left_out"]["call_bytes"].get<uint64_t>(), kLib);
  // The text header says it too.
  RunResult text = test::Run({IotwinBin(), "report", "--no-progress", s.trace, "--scope", "data"}, 60);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("scope      data: left out"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("left out "), std::string::npos) << text.out;
}

// `--filter file=` used to match only the name as the program passed it: a relative open or an
// openat on a directory descriptor was never matched by an absolute glob.
TEST(DataScope, FilterFileMatchesResolvedRelativeAndDirfdOpens) {
  IOTWIN_SHARED_TRACE_OR_FAIL(s);
  Report r = RunReport(s, {"--filter", "file=" + s.dir + "/data/*"});
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.read_by_ino, Expect(s, {"rel", "dirfd", "inherited"}));
  // A glob on the name as passed still matches it.
  Report as_passed = RunReport(s, {"--filter", "file=data/rel.bin"});
  ASSERT_TRUE(as_passed.error.empty()) << as_passed.error;
  EXPECT_EQ(as_passed.read_by_ino, Expect(s, {"rel"}));
}

TEST(DataScope, BadOptionValuesAreRefusedWithTheirName) {
  IOTWIN_SHARED_TRACE_OR_FAIL(s);
  RunResult bad_scope = test::Run({IotwinBin(), "report", s.trace, "--scope", "dta"}, 60);
  EXPECT_EQ(bad_scope.exit_code, 2);
  EXPECT_NE(bad_scope.err.find("--scope: 'dta' is not one of: data, all"), std::string::npos)
      << bad_scope.err;
  RunResult relative = test::Run({IotwinBin(), "report", s.trace, "--include", "data/*"}, 60);
  EXPECT_EQ(relative.exit_code, 2);
  EXPECT_NE(relative.err.find("--include data/*"), std::string::npos) << relative.err;
}

// replay: the files a scope leaves out are not prepared and their calls are skipped.
TEST(DataScope, ReplayDryRunSkipsWhatTheScopeLeavesOut) {
  IOTWIN_SHARED_TRACE_OR_FAIL(s);
  RunResult all = test::Run({IotwinBin(), "replay", s.trace, "--dry-run", "--json"}, 60);
  RunResult data = test::Run({IotwinBin(), "replay", s.trace, "--dry-run", "--json", "--include",
                        s.dir + "/data/*"},
                       60);
  ASSERT_EQ(all.exit_code, 0) << all.err;
  ASSERT_EQ(data.exit_code, 0) << data.err;
  const nlohmann::json a = nlohmann::json::parse(all.out), d = nlohmann::json::parse(data.out);
  EXPECT_FALSE(a["ops"]["skipped_by_reason"].contains("out_of_scope"));
  ASSERT_TRUE(d["ops"]["skipped_by_reason"].contains("out_of_scope")) << d["ops"].dump();
  // open, 20 reads and close of the library at least.
  EXPECT_GE(d["ops"]["skipped_by_reason"]["out_of_scope"].get<uint64_t>(), 22u);
  EXPECT_LT(d["files"]["preexisting_files"].get<uint64_t>(),
            a["files"]["preexisting_files"].get<uint64_t>());
}

// A scoped replay's own trace names its scope; compare without that scope says so.
TEST(DataScope, CompareOfAScopedReplayWithoutTheScopeSaysSo) {
  IOTWIN_SHARED_TRACE_OR_FAIL(s);
  TempDir tmp;
  const std::string replayed = tmp / "replay.iotwin", include = s.dir + "/data/*";
  RunResult replay = test::Run({IotwinBin(), "replay", s.trace, "--root", tmp / "root", "-q",
                                "--include", include, "--record", replayed},
                               120);
  ASSERT_EQ(replay.exit_code, 0) << replay.err;
  RunResult bare = test::Run({IotwinBin(), "compare", s.trace, replayed}, 60);
  EXPECT_NE(bare.err.find("note: the replay was made with a data scope"), std::string::npos)
      << bare.err;
  RunResult scoped = test::Run({IotwinBin(), "compare", s.trace, replayed, "--include", include}, 60);
  EXPECT_EQ(scoped.err.find("note: the replay was made"), std::string::npos) << scoped.err;
}

// record --scope: the trace written holds no record of the files out of scope, its header says
// which scope, its summary what was left out, and the unscoped copy is gone.
TEST(DataScope, RecordWithAScopeWritesOnlyTheDataFiles) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir tmp;
  ScopeTrace s = Record(tmp, "scoped", {"--scope", "data"});
  ASSERT_TRUE(s.error.empty()) << s.error;
  EXPECT_NE(access((s.trace + ".unscoped").c_str(), F_OK), 0);
  LoadedTrace t = LoadTrace(s.trace);
  ASSERT_TRUE(t.error.empty()) << t.error;
  ASSERT_TRUE(t.meta.contains("scope"));
  EXPECT_EQ(t.meta["scope"]["preset"], "data");
  ASSERT_TRUE(t.summary.has_value());
  EXPECT_GE((*t.summary)["scope_dropped"]["bytes"].get<uint64_t>(), kLib);
  std::set<uint64_t> data = {s.ino.at("rel"), s.ino.at("dirfd"), s.ino.at("inherited")};
  std::set<uint64_t> seen;
  for (const auto& c : t.syscalls) {
    EXPECT_NE(c.sc.ino, s.ino.at("lib")) << "a call on the library was kept: " << OpName(c.sc.op);
    if (data.count(c.sc.ino)) seen.insert(c.sc.ino);
  }
  EXPECT_EQ(seen, data);
  Report r = RunReport(s, {});
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.read_by_ino, Expect(s, {"rel", "dirfd", "inherited"}));
  RunResult text = test::Run({IotwinBin(), "report", "--no-progress", s.trace}, 60);
  EXPECT_NE(text.out.find("recorded   with scope data"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace iotwin::test
