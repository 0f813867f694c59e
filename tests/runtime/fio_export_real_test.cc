// `iotwin export --fio` of traces of real programs (python3 with numpy, tar czf, sqlite3, the
// model-load generator, PyTorch): the exported job runs (`fio DIR/replay.fio` exits 0) and fio
// issues exactly the exported operations. The count is taken by recording fio itself with
// `iotwin record` and counting its system calls on the job's files: preads/pwrites (and libaio
// submissions) with their byte counts, fsync/fdatasync, punch-hole fallocates, per file. fio's
// JSON counts are not used for this: they leave out the syncs of an iolog. The recorded run is
// fio's second run of the job, on the files its first run prepared: the preparation jobs then
// write nothing, so every call on the files is a replayed operation.
// fio client/server: two `fio --server` instances on loopback ports, each in its own working
// directory, replay the job (exported with a relative --fio-root) into their own directory.
// Programs that are not installed are skipped with a message naming them.
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "format/op_info.h"
#include "format/records.h"
#include "model/path.h"
#include "model/trace_state.h"
#include "runtime_util.h"
#include "trace_walk.h"

namespace iotwin::test {
namespace {

struct Ops {
  uint64_t reads = 0, writes = 0, trims = 0, syncs = 0, read_bytes = 0, write_bytes = 0;
  bool operator==(const Ops&) const = default;
  uint64_t total() const { return reads + writes + trims + syncs; }
};

std::ostream& operator<<(std::ostream& os, const Ops& o) {
  return os << "{reads " << o.reads << " (" << o.read_bytes << " B), writes " << o.writes << " ("
            << o.write_bytes << " B), trims " << o.trims << ", syncs " << o.syncs << "}";
}

std::string Find(const char* tool) {
  for (const char* dir : {"/usr/bin/", "/usr/local/bin/", "/bin/"}) {
    std::string p = std::string(dir) + tool;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return {};
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// What fio issued, per file under `root` (resolved absolute paths), from a trace of fio.
std::map<std::string, Ops> CountIssued(const std::string& trace, const std::string& root,
                                       std::string* error) {
  std::map<std::string, Ops> by_file;
  model::TraceState fds;
  auto file_of = [&](const model::OpenFileDescription* d) -> Ops* {
    if (!d || d->path.empty() || !model::PathIsWithin(d->path, root)) return nullptr;
    return &by_file[d->path];
  };
  TraceWalk w = WalkTrace(trace, [&](TraceReader& r, const iot_rec_hdr* h) {
    if (h->type == IOT_REC_PROC) {
      const auto& p = *reinterpret_cast<const iot_proc*>(h);
      if (p.path_id) {
        fds.OnProc(p, r.String(p.path_id));
      } else {
        fds.OnProc(p);
      }
    } else if (h->type == IOT_REC_SYSCALL) {
      const auto& sc = *reinterpret_cast<const iot_syscall*>(h);
      std::optional<std::string_view> path;
      if (sc.path_id) path = r.String(sc.path_id);
      const model::SyscallEffect e = fds.OnSyscall(sc, path);
      if (sc.ret < 0 || (sc.sflags & IOT_SCF_INTERRUPTED)) return;
      Ops* ops = file_of(fds.Description(e.desc));
      if (!ops) return;
      const OpInfo& info = GetOpInfo(sc.op);
      const auto n = static_cast<uint64_t>(sc.ret);
      if (info.family == OpFamily::kRead && n > 0) {
        ops->reads++;
        ops->read_bytes += n;
      } else if (info.family == OpFamily::kWrite && n > 0) {
        ops->writes++;
        ops->write_bytes += n;
      } else if (sc.op == IOT_OP_FSYNC || sc.op == IOT_OP_FDATASYNC) {
        ops->syncs++;
      } else if (sc.op == IOT_OP_FALLOCATE && (sc.mode & FALLOC_FL_PUNCH_HOLE)) {
        ops->trims++;
      }
    } else if (h->type == IOT_REC_FD_SNAPSHOT) {
      const auto& s = *reinterpret_cast<const iot_fd_snapshot*>(h);
      fds.OnFdSnapshot(s, r.String(s.path_id));
    } else if (h->type == IOT_REC_ASYNC_IO) {
      const auto& io = *reinterpret_cast<const iot_async_io*>(h);
      if (io.phase != IOT_AIO_SUBMIT) return;
      Ops* ops = file_of(fds.FdDescription(io.tgid, io.fd));
      if (!ops) return;
      switch (AsyncOp(io.engine, io.opcode).kind) {
        case AsyncKind::kRead: ops->reads++; ops->read_bytes += io.length; break;
        case AsyncKind::kWrite: ops->writes++; ops->write_bytes += io.length; break;
        case AsyncKind::kFsync: ops->syncs++; break;
        default: break;
      }
    }
  });
  if (!w.error.empty()) *error = w.error;
  if (w.truncated) *error += " (trace truncated)";
  return by_file;
}

// What the export says the job replays, per file name as the job names it.
std::map<std::string, Ops> Exported(const nlohmann::json& info, Ops* total) {
  std::map<std::string, Ops> by_name;
  for (const auto& f : info.at("per_file")) {
    if (f.contains("left_out")) continue;
    Ops& o = by_name[f.at("fio_name").get<std::string>()];
    o.reads = f.at("reads");
    o.writes = f.at("writes");
    o.trims = f.at("trims");
    o.syncs = f.at("syncs");
    o.read_bytes = f.at("read_bytes");
    o.write_bytes = f.at("write_bytes");
  }
  total->reads = info.at("reads");
  total->writes = info.at("writes");
  total->trims = info.at("trims");
  total->syncs = info.at("syncs");
  total->read_bytes = info.at("read_bytes");
  total->write_bytes = info.at("write_bytes");
  return by_name;
}

// Files that are not storage never reach the job.
void ExpectOnlyStorage(const nlohmann::json& info) {
  for (const auto& f : info.at("per_file")) {
    const std::string original = f.at("original");
    EXPECT_FALSE(model::IsPseudoFsPath(model::NormalizePath(original))) << original;
    EXPECT_FALSE(original.empty());
  }
}

struct RealRun {
  nlohmann::json info;  // export.json
  Ops exported;
};

// Records `argv`, exports it for fio (with `export_args`), runs the job twice (the first run
// must exit 0; the second is recorded) and checks that fio issued the exported operations, file
// by file. `label` names the program in the printed figures.
RealRun ExportAndReplay(const TempDir& tmp, const std::string& label,
                        const std::vector<std::string>& argv,
                        const std::vector<std::string>& export_args = {}) {
  RealRun out;
  const std::string fio = Find("fio");
  const std::string trace = tmp / (label + ".iotwin");
  std::vector<std::string> rec = {IotwinBin(), "record", "--no-status", "-o", trace, "--"};
  rec.insert(rec.end(), argv.begin(), argv.end());
  RunResult rr = iotwin::test::Run(rec, 300);
  EXPECT_EQ(rr.exit_code, 0) << label << ": " << rr.err;
  if (rr.exit_code != 0) return out;

  std::vector<std::string> ex = {IotwinBin(), "export", trace, "--fio", tmp / "fio"};
  ex.insert(ex.end(), export_args.begin(), export_args.end());
  RunResult er = iotwin::test::Run(ex);
  EXPECT_EQ(er.exit_code, 0) << er.err;
  out.info = nlohmann::json::parse(Slurp(tmp / "fio/export.json"), nullptr, false);
  EXPECT_FALSE(out.info.is_discarded());
  if (er.exit_code != 0 || out.info.is_discarded()) return out;
  const std::map<std::string, Ops> want = Exported(out.info, &out.exported);
  EXPECT_GT(out.exported.total(), 0u) << label << ": nothing exported\n" << er.err;
  ExpectOnlyStorage(out.info);

  const std::string job = tmp / "fio/replay.fio";
  RunResult first = iotwin::test::Run({fio, job}, 300);
  EXPECT_EQ(first.exit_code, 0) << label << ": fio " << job << "\n" << first.out << first.err;
  const std::string fio_trace = tmp / (label + ".fio.iotwin");
  RunResult second =
      Run({IotwinBin(), "record", "--no-status", "--fail-on-loss", "-o", fio_trace, "--", fio, job},
          300);
  EXPECT_EQ(second.exit_code, 0) << label << ": recorded fio run\n" << second.out << second.err;

  std::string error;
  const std::map<std::string, Ops> got = CountIssued(fio_trace, tmp / "fio/files", &error);
  EXPECT_TRUE(error.empty()) << error;
  Ops issued;
  for (const auto& [name, ops] : got) {
    issued.reads += ops.reads;
    issued.writes += ops.writes;
    issued.trims += ops.trims;
    issued.syncs += ops.syncs;
    issued.read_bytes += ops.read_bytes;
    issued.write_bytes += ops.write_bytes;
  }
  EXPECT_EQ(issued, out.exported) << label;
  for (const auto& [name, ops] : want) {
    auto it = got.find(name);
    EXPECT_EQ(it == got.end() ? Ops{} : it->second, ops) << label << ": " << name;
  }
  for (const auto& [name, ops] : got) EXPECT_TRUE(want.count(name)) << "not exported: " << name;
  std::cout << "[figures] " << label << ": exported " << out.exported.total() << " ops "
            << out.exported << "; fio issued " << issued.total() << " ops " << issued
            << "; fio exit " << first.exit_code << " (recorded run " << second.exit_code
            << "); files " << out.info.value("files", 0) << ", left out "
            << out.info.value("files_left_out", nlohmann::json::object()).dump() << "\n";
  return out;
}

// An object of counts by reason in export.json ("skipped", "files_left_out").
std::map<std::string, uint64_t> Reasons(const nlohmann::json& info, const char* key) {
  std::map<std::string, uint64_t> out;
  if (!info.is_object() || !info.contains(key)) return out;
  for (const auto& [why, n] : info.at(key).items()) out[why] = n.get<uint64_t>();
  return out;
}

bool PythonHas(const std::string& module) {
  if (access("/usr/bin/python3", X_OK) != 0) return false;
  return Run({"/usr/bin/python3", "-c", "import " + module}, 120).exit_code == 0;
}

#define REQUIRE_PROGRAM(cond, what)                                    \
  do {                                                                 \
    IOTWIN_REQUIRE_BPF_OR_SKIP();                                      \
    if (Find("fio").empty()) GTEST_SKIP() << "fio is not installed";   \
    if (!(cond)) GTEST_SKIP() << what << " is not installed";          \
  } while (0)

TEST(FioExportReal, PythonNumpySaveLoadMemmap) {
  REQUIRE_PROGRAM(PythonHas("numpy"), "/usr/bin/python3 with numpy");
  TempDir tmp;
  WriteText(tmp / "np_io.py",
            "import sys, numpy as np\n"
            "d = sys.argv[1]\n"
            "a = np.arange(1 << 18, dtype=np.float32)\n"
            "np.save(d + '/arr.npy', a)\n"
            "b = np.load(d + '/arr.npy')\n"
            "m = np.load(d + '/arr.npy', mmap_mode='r')\n"
            "s = float(m[::1024].sum())\n"
            "w = np.memmap(d + '/mm.dat', dtype=np.float32, mode='w+', shape=(1 << 16,))\n"
            "w[:] = 1.0\n"
            "w.flush()\n"
            "del w\n"
            "r = np.memmap(d + '/mm.dat', dtype=np.float32, mode='r')\n"
            "print(float(r.sum()), s, b.shape)\n");
  RealRun run = ExportAndReplay(tmp, "python3-numpy",
                                {"/usr/bin/python3", tmp / "np_io.py", tmp.path()});
  if (!run.info.is_object()) return;  // the failure is reported
  EXPECT_GT(run.exported.writes, 0u);  // np.save
}

// --scope data: the interpreter, its libraries and locale data are left out, counted; what is
// left still runs and is issued exactly.
TEST(FioExportReal, Sqlite3DataScope) {
  REQUIRE_PROGRAM(!Find("sqlite3").empty(), "sqlite3");
  TempDir tmp;
  RealRun run = ExportAndReplay(tmp, "sqlite3-scope-data",
                                {Find("sqlite3"), tmp / "s.db",
                                 "create table t(a); insert into t values(1); select * from t;"},
                                {"--scope", "data"});
  if (!run.info.is_object()) return;  // the failure is reported
  EXPECT_GT(Reasons(run.info, "files_left_out")["out of scope"], 0u) << run.info.dump(2);
  for (const auto& f : run.info.at("per_file")) {
    EXPECT_EQ(f.at("original").get<std::string>().find(".so"), std::string::npos) << f.dump();
  }
  EXPECT_EQ(run.info.at("scope").at("preset"), "data");
}

TEST(FioExportReal, TarGzipThroughAPipe) {
  REQUIRE_PROGRAM(!Find("tar").empty() && !Find("gzip").empty(), "tar or gzip");
  TempDir tmp;
  mkdir((tmp / "data").c_str(), 0755);
  for (int i = 0; i < 5; i++) {
    std::string text;
    for (int k = 0; k < 20000; k++) text += std::to_string(k * 7919 + i) + "\n";
    WriteText(tmp / ("data/f" + std::to_string(i)), text);
  }
  RealRun run = ExportAndReplay(tmp, "tar-czf",
                                {Find("tar"), "czf", tmp / "t.tgz", "-C", tmp.path(), "data"});
  if (!run.info.is_object()) return;  // the failure is reported
  // The tar -> gzip pipe is not storage: its reads and writes are counted as left out.
  uint64_t pipe_ops = 0;
  for (const auto& [why, n] : Reasons(run.info, "skipped")) {
    if (why.find("pipe (not storage)") != std::string::npos) pipe_ops += n;
  }
  EXPECT_GT(pipe_ops, 0u) << run.info.dump(2);
}

TEST(FioExportReal, Sqlite3InsertsAndSelects) {
  REQUIRE_PROGRAM(!Find("sqlite3").empty(), "sqlite3");
  TempDir tmp;
  ExportAndReplay(tmp, "sqlite3",
                  {Find("sqlite3"), tmp / "s.db",
                   "create table t(a, b); insert into t values(1, 'x');"
                   " insert into t values(2, 'y'); insert into t select a + 2, b from t;"
                   " select * from t; select count(*) from t;"});
}

void PrepareShards(const TempDir& tmp) {
  RunResult prep = iotwin::test::Run(
      {WorkloadBin(), "model-load", "--dir", tmp / "m", "--prepare-only", "--quiet"});
  ASSERT_EQ(prep.exit_code, 0) << prep.err;
}

TEST(FioExportReal, ModelLoadMmap) {
  REQUIRE_PROGRAM(true, "");
  TempDir tmp;
  PrepareShards(tmp);
  RealRun run = ExportAndReplay(tmp, "model-load-mmap",
                                {WorkloadBin(), "model-load", "--dir", tmp / "m", "--mode", "mmap",
                                 "--drop-cache", "--quiet"});
  if (!run.info.is_object()) return;  // the failure is reported
  // The shards are only mapped: left out, with the note that says how to replay their faults.
  bool noted = false;
  for (const auto& [why, n] : Reasons(run.info, "files_left_out")) {
    noted |= why.find("--fio-faults") != std::string::npos && n > 0;
  }
  EXPECT_TRUE(noted) << run.info.dump(2);
}

TEST(FioExportReal, ModelLoadMmapWithFaults) {
  REQUIRE_PROGRAM(true, "");
  TempDir tmp;
  PrepareShards(tmp);
  RealRun run = ExportAndReplay(tmp, "model-load-mmap-faults",
                                {WorkloadBin(), "model-load", "--dir", tmp / "m", "--mode", "mmap",
                                 "--drop-cache", "--quiet"},
                                {"--fio-faults"});
  if (!run.info.is_object()) return;  // the failure is reported
  // The shards are in the job and prepared: their header reads, and their major faults as page
  // reads when the capture saw any (a fault on a page readahead already brought in is minor).
  uint64_t shard_reads = 0;
  for (const auto& f : run.info.at("per_file")) {
    if (f.at("original").get<std::string>().find(tmp / "m/") == 0 && !f.contains("left_out")) {
      shard_reads += f.at("reads").get<uint64_t>();
    }
  }
  EXPECT_GT(shard_reads, 0u) << run.info.dump(2);
}

TEST(FioExportReal, PyTorchSaveLoad) {
  REQUIRE_PROGRAM(PythonHas("torch"), "/usr/bin/python3 with torch (python3-torch)");
  TempDir tmp;
  WriteText(tmp / "torch_io.py",
            "import sys, torch\n"
            "d = sys.argv[1]\n"
            "m = {'w': torch.randn(256, 1024), 'b': torch.randn(1024)}\n"
            "torch.save(m, d + '/model.pt')\n"
            "x = torch.load(d + '/model.pt')\n"
            "print(float(x['w'].sum()))\n");
  RealRun run =
      ExportAndReplay(tmp, "pytorch", {"/usr/bin/python3", tmp / "torch_io.py", tmp.path()});
  if (!run.info.is_object()) return;  // the failure is reported
  EXPECT_GT(run.exported.writes, 0u);  // torch.save
}

// ---- fio client/server ------------------------------------------------------------------------

uint16_t FreeLoopbackPort() {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  uint16_t port = 0;
  if (bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(s);
  return port;
}

bool Listening(uint16_t port) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  const bool ok = connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(s);
  return ok;
}

// A `fio --server` recorded by `iotwin record`, in its own working directory and process
// group. Stop() ends it (SIGTERM to the recorder, which passes it on and finishes the trace);
// the destructor kills whatever is left of the group, on every path out of the test.
class RecordedFioServer {
 public:
  RecordedFioServer(const std::string& dir, uint16_t port, const std::string& trace) {
    const std::string fio = Find("fio");
    const std::string listen = "--server=ip:127.0.0.1," + std::to_string(port);
    const std::string log = dir + "/server.log";
    std::vector<std::string> argv = {IotwinBin(), "record", "--no-status", "--fail-on-loss",
                                     "-o", trace, "--", fio, listen};
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      if (chdir(dir.c_str()) != 0) _exit(126);
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    if (pid_ > 0) setpgid(pid_, pid_);
  }
  ~RecordedFioServer() {
    if (pid_ <= 0) return;
    Stop();
    kill(-pid_, SIGKILL);
  }
  RecordedFioServer(const RecordedFioServer&) = delete;
  RecordedFioServer& operator=(const RecordedFioServer&) = delete;

  bool WaitListening(uint16_t port, int timeout_s) const {
    for (int i = 0; i < timeout_s * 10; i++) {
      if (Listening(port)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  // The recorder's exit status, -1 when it had to be killed.
  int Stop() {
    if (pid_ <= 0 || stopped_) return status_;
    stopped_ = true;
    kill(pid_, SIGTERM);
    for (int i = 0; i < 300; i++) {
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return status_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    kill(-pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    return status_;
  }

 private:
  pid_t pid_ = -1;
  bool stopped_ = false;
  int status_ = -1;
};

TEST(FioExportReal, ClientServerReplaysIntoEachServersDirectory) {
  REQUIRE_PROGRAM(true, "");
  TempDir tmp;
  const std::string trace = tmp / "micro.iotwin";
  RunResult rr = iotwin::test::Run({IotwinBin(), "record", "--no-status", "-o", trace, "--",
                                    WorkloadBin(), "micro", "--dir", tmp / "w", "--op",
                                    "randwrite", "--ops", "200", "--quiet"},
                                   300);
  ASSERT_EQ(rr.exit_code, 0) << rr.err;
  // A relative root: each server makes and replays the files in its own working directory.
  RunResult ex = iotwin::test::Run(
      {IotwinBin(), "export", trace, "--fio", tmp / "fio", "--fio-root", "replay-files"});
  ASSERT_EQ(ex.exit_code, 0) << ex.err;
  auto info = nlohmann::json::parse(Slurp(tmp / "fio/export.json"));
  Ops total;
  const std::map<std::string, Ops> want = Exported(info, &total);
  ASSERT_GT(total.writes, 0u) << ex.err;

  const uint16_t port_a = FreeLoopbackPort();
  uint16_t port_b = FreeLoopbackPort();
  while (port_b == port_a) port_b = FreeLoopbackPort();
  ASSERT_NE(port_a, 0);
  ASSERT_NE(port_b, 0);
  const std::string dir_a = tmp / "server-a", dir_b = tmp / "server-b";
  mkdir(dir_a.c_str(), 0755);
  mkdir(dir_b.c_str(), 0755);
  {
    RecordedFioServer a(dir_a, port_a, tmp / "server-a.iotwin");
    RecordedFioServer b(dir_b, port_b, tmp / "server-b.iotwin");
    ASSERT_TRUE(a.WaitListening(port_a, 60)) << Slurp(dir_a + "/server.log");
    ASSERT_TRUE(b.WaitListening(port_b, 60)) << Slurp(dir_b + "/server.log");
    const std::string fio = Find("fio");
    // Each --client takes the job files that follow it: fio 3.33 sends a job file named once
    // after the last --client to that server alone (and exits 0).
    const std::string job = tmp / "fio/replay.fio";
    RunResult client =
        iotwin::test::Run({fio, "--client=127.0.0.1," + std::to_string(port_a), job,
                           "--client=127.0.0.1," + std::to_string(port_b), job},
                          300);
    EXPECT_EQ(client.exit_code, 0) << client.out << client.err;
    EXPECT_EQ(client.out.find("err="), client.out.find("err= 0")) << client.out;
    a.Stop();
    b.Stop();
  }
  for (const auto& [dir, server_trace] : {std::pair{dir_a, tmp / "server-a.iotwin"},
                                          std::pair{dir_b, tmp / "server-b.iotwin"}}) {
    std::string error;
    const std::map<std::string, Ops> got = CountIssued(server_trace, dir + "/replay-files", &error);
    EXPECT_TRUE(error.empty()) << error;
    Ops issued;
    for (const auto& [name, want_ops] : want) {
      const std::string path = dir + "/" + name;
      struct stat st {};
      EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
      auto it = got.find(path);
      const Ops ops = it == got.end() ? Ops{} : it->second;
      EXPECT_EQ(ops, want_ops) << path;
      issued.writes += ops.writes;
      issued.reads += ops.reads;
      issued.syncs += ops.syncs;
    }
    std::cout << "[figures] client/server " << dir << ": exported " << total.total()
              << " ops, this server issued " << issued.total() << "\n";
  }
}

}  // namespace
}  // namespace iotwin::test
