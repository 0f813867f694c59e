// Helpers for the `iotwin record` runtime tests: load a trace into memory, read a test program's
// call log (tests/progs/prog_log.h) and compare the two call by call, per thread.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "format/records.h"
#include "format/trace_reader.h"
#include "iotwin_abi.h"
#include "runtime_util.h"
#include "trace_walk.h"

namespace iotwin::test {

struct SyscallRec {
  iot_syscall sc{};
  std::string path, path2;
  std::vector<uint64_t> iov;  // from the IOVEC record that follows a vectored call
  bool has_iov = false;
};

struct LoadedTrace {
  nlohmann::json meta;
  std::optional<nlohmann::json> summary;
  bool truncated = false;
  std::vector<SyscallRec> syscalls;
  std::vector<iot_proc> procs;
  std::vector<std::string> proc_paths;  // path of procs[i]
  std::vector<iot_async_io> asyncs;
  // IOVEC records of vectored async requests, by (tid, ts) of the request: count, lengths.
  std::map<std::pair<uint32_t, uint64_t>, std::pair<uint16_t, std::vector<uint64_t>>> async_iovecs;
  std::vector<iot_intent> intents;
  std::vector<std::string> intent_labels;
  std::vector<iot_fd_snapshot> fd_snapshots;
  std::vector<std::string> fd_snapshot_paths;
  std::vector<iot_map_snapshot> map_snapshots;
  std::vector<iot_lost> losts;
  size_t clocks = 0;
  std::string error;  // reading problem, empty when fine
};

inline LoadedTrace LoadTrace(const std::string& path) {
  LoadedTrace t;
  TraceWalk walk = WalkTrace(path, [&t](const TraceReader& reader, const iot_rec_hdr* h) {
    switch (h->type) {
      case IOT_REC_SYSCALL: {
        SyscallRec s;
        s.sc = As<iot_syscall>(h);
        s.path = std::string(reader.String(s.sc.path_id));
        s.path2 = std::string(reader.String(s.sc.path2_id));
        t.syscalls.push_back(std::move(s));
        break;
      }
      case IOT_REC_IOVEC: {
        const auto& v = As<iot_iovec>(h);
        std::vector<uint64_t> iov;
        const uint8_t* lens = reinterpret_cast<const uint8_t*>(h) + sizeof(iot_iovec);
        for (uint16_t i = 0; i < v.captured; i++) {
          uint64_t len;
          memcpy(&len, lens + 8 * i, 8);
          iov.push_back(len);
        }
        // A vectored call's, or an async request's (paired by tid and submit time).
        if (!t.syscalls.empty() && t.syscalls.back().sc.tid == v.tid &&
            t.syscalls.back().sc.ts == v.ts) {
          auto& s = t.syscalls.back();
          s.has_iov = true;
          s.iov = std::move(iov);
        } else {
          t.async_iovecs[{v.tid, v.ts}] = {v.count, std::move(iov)};
        }
        break;
      }
      case IOT_REC_PROC:
        t.procs.push_back(As<iot_proc>(h));
        t.proc_paths.emplace_back(reader.String(t.procs.back().path_id));
        break;
      case IOT_REC_ASYNC_IO:
        t.asyncs.push_back(As<iot_async_io>(h));
        break;
      case IOT_REC_INTENT:
        t.intents.push_back(As<iot_intent>(h));
        t.intent_labels.emplace_back(reader.String(t.intents.back().label_id));
        break;
      case IOT_REC_FD_SNAPSHOT:
        t.fd_snapshots.push_back(As<iot_fd_snapshot>(h));
        t.fd_snapshot_paths.emplace_back(reader.String(t.fd_snapshots.back().path_id));
        break;
      case IOT_REC_MAP_SNAPSHOT:
        t.map_snapshots.push_back(As<iot_map_snapshot>(h));
        break;
      case IOT_REC_LOST:
        t.losts.push_back(As<iot_lost>(h));
        break;
      case IOT_REC_CLOCK:
        t.clocks++;
        break;
      default:
        break;
    }
  });
  t.meta = walk.meta;
  t.summary = walk.summary;
  t.truncated = walk.truncated;
  t.error = walk.error;
  return t;
}

inline std::vector<nlohmann::json> ReadLog(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

// Total events lost according to the trace's footer.
inline uint64_t LostInSummary(const LoadedTrace& t) {
  uint64_t n = 0;
  if (t.summary && t.summary->contains("lost")) {
    for (const auto& el : (*t.summary)["lost"].items()) n += el.value().get<uint64_t>();
  }
  return n;
}

// Syscall records of each thread between its begin and end brackets (prog_log.h).
inline std::map<uint32_t, std::vector<SyscallRec>> BracketedByTid(const LoadedTrace& t) {
  constexpr int kBegin = -1001, kEnd = -1002;
  std::map<uint32_t, std::vector<SyscallRec>> out;
  std::map<uint32_t, int> state;  // 0 before, 1 inside, 2 after
  for (const auto& s : t.syscalls) {
    int& st = state[s.sc.tid];
    if (s.sc.op == IOT_OP_CLOSE && s.sc.fd == kBegin) {
      st = 1;
      out[s.sc.tid];
      continue;
    }
    if (s.sc.op == IOT_OP_CLOSE && s.sc.fd == kEnd) {
      st = 2;
      continue;
    }
    if (st == 1) out[s.sc.tid].push_back(s);
  }
  return out;
}

// Compares one logged field with the record's value; returns "" or a description.
inline std::string CompareField(const std::string& key, const nlohmann::json& want,
                                const SyscallRec& r) {
  const iot_syscall& s = r.sc;
  if (key == "path" || key == "path2") {
    const std::string& got = key == "path" ? r.path : r.path2;
    return got == want.get<std::string>() ? "" : "\"" + got + "\"";
  }
  if (key == "iov") {
    std::string got;
    for (size_t i = 0; i < r.iov.size(); i++) got += (i ? "," : "") + std::to_string(r.iov[i]);
    return got == want.get<std::string>() ? "" : "\"" + got + "\"";
  }
  int64_t sv = 0;
  uint64_t uv = 0;
  if (key == "fd") {
    sv = s.fd;
    uv = static_cast<uint32_t>(s.fd);
  } else if (key == "fd2") {
    sv = s.fd2;
    uv = static_cast<uint32_t>(s.fd2);
  } else if (key == "ret") {
    sv = s.ret;
    uv = static_cast<uint64_t>(s.ret);
  } else if (key == "offset") {
    uv = s.offset;
    sv = static_cast<int64_t>(uv);
  } else if (key == "length") {
    uv = s.length;
    sv = static_cast<int64_t>(uv);
  } else if (key == "aux") {
    uv = s.aux;
    sv = static_cast<int64_t>(uv);
  } else if (key == "flags") {
    uv = s.flags;
    sv = uv;
  } else if (key == "mode") {
    uv = s.mode;
    sv = uv;
  } else if (key == "ino") {
    uv = s.ino;
    sv = static_cast<int64_t>(uv);
  } else if (key == "fsize") {
    uv = s.fsize;
    sv = static_cast<int64_t>(uv);
  } else {
    return "unknown field in log";
  }
  bool eq = want.is_number_unsigned() ? want.get<uint64_t>() == uv : want.get<int64_t>() == sv;
  return eq ? "" : std::to_string(sv) + " (0x" + fmt::format("{:x}", uv) + ")";
}

// Compares a program's logged calls with the recorded ones, per thread. Returns the problems.
inline std::vector<std::string> CompareCalls(const std::vector<nlohmann::json>& log,
                                             const LoadedTrace& t) {
  std::vector<std::string> problems;
  std::map<uint32_t, std::vector<nlohmann::json>> want;
  for (const auto& e : log) {
    if (e.contains("op")) want[e["tid"].get<uint32_t>()].push_back(e);
  }
  auto got = BracketedByTid(t);
  for (const auto& [tid, calls] : want) {
    auto it = got.find(tid);
    if (it == got.end()) {
      problems.push_back(fmt::format("tid {}: no bracketed calls in the trace", tid));
      continue;
    }
    const auto& recs = it->second;
    size_t n = std::max(calls.size(), recs.size());
    for (size_t i = 0; i < n; i++) {
      if (i >= calls.size()) {
        problems.push_back(
            fmt::format("tid {} call {}: extra recorded {}", tid, i, OpName(recs[i].sc.op)));
        continue;
      }
      if (i >= recs.size()) {
        problems.push_back(fmt::format("tid {} call {}: {} missing from the trace", tid, i,
                                       calls[i]["op"].get<std::string>()));
        continue;
      }
      const auto& c = calls[i];
      std::string op = c["op"].get<std::string>();
      if (OpName(recs[i].sc.op) != op) {
        problems.push_back(fmt::format("tid {} call {}: logged {}, recorded {}", tid, i, op,
                                       OpName(recs[i].sc.op)));
        continue;
      }
      for (const auto& el : c.items()) {
        if (el.key() == "op" || el.key() == "pid" || el.key() == "tid") continue;
        std::string diff = CompareField(el.key(), el.value(), recs[i]);
        if (!diff.empty()) {
          problems.push_back(fmt::format("tid {} call {} ({}): {} logged {}, recorded {}", tid, i,
                                         op, el.key(), el.value().dump(), diff));
        }
      }
    }
  }
  return problems;
}

// A process started in the background (stdout to /dev/null, stderr captured).
struct Spawned {
  pid_t pid = -1;
  int err_fd = -1;
};

inline Spawned Spawn(const std::vector<std::string>& argv) {
  Spawned s;
  int err[2];
  if (pipe2(err, O_CLOEXEC) != 0) return s;
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(err[1], 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(err[1]);
  s.pid = pid;
  s.err_fd = err[0];
  return s;
}

// Waits for a spawned process (killing it after timeout_s) and collects its stderr.
inline RunResult WaitSpawned(Spawned& s, int timeout_s = 120) {
  RunResult r;
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  bool killed = false;
  for (;;) {
    struct pollfd p = {s.err_fd, POLLIN, 0};
    if (poll(&p, 1, 100) > 0) {
      char buf[4096];
      ssize_t n = read(s.err_fd, buf, sizeof buf);
      if (n <= 0) break;
      r.err.append(buf, static_cast<size_t>(n));
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (!killed && now.tv_sec - start.tv_sec > timeout_s) {
      kill(s.pid, SIGKILL);
      killed = true;
    }
  }
  close(s.err_fd);
  int status = 0;
  waitpid(s.pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// Waits until `path` exists (a pid file, a trace); false after timeout_ms.
inline bool WaitForFile(const std::string& path, int timeout_ms = 20000) {
  for (int i = 0; i < timeout_ms / 10; i++) {
    if (access(path.c_str(), F_OK) == 0) return true;
    usleep(10000);
  }
  return false;
}

inline std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

inline std::string ReadFileText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// io_fork_exec's process records: the parent's fork of the child (a process, not a thread), the
// child's exec of the program and its exit with status 5, found from the "waited" log entry.
inline void ExpectForkExecExitOfIoForkExec(const std::vector<nlohmann::json>& log,
                                          const LoadedTrace& trace) {
  uint32_t parent = 0, child = 0;
  for (const auto& e : log) {
    if (e.value("kind", "") == "waited") {
      parent = e["pid"].get<uint32_t>();
      child = e["child"].get<uint32_t>();
    }
  }
  ASSERT_NE(child, 0u);
  bool fork = false, exec = false, exited = false;
  for (size_t i = 0; i < trace.procs.size(); i++) {
    const auto& p = trace.procs[i];
    if (p.kind == IOT_PROC_FORK && p.tgid == parent && p.child_tgid == child) {
      fork = true;
      EXPECT_EQ(p.clone_flags & 0x10000, 0u);  // a process, not a thread
    }
    if (p.kind == IOT_PROC_EXEC && p.tgid == child) {
      exec = true;
      EXPECT_EQ(trace.proc_paths[i], TestProg("io_fork_exec"));
      EXPECT_STREQ(p.comm, "io_fork_exec");
    }
    if (p.kind == IOT_PROC_EXIT && p.tgid == child) {
      exited = true;
      EXPECT_EQ(p.exit_code, 5 << 8);
      EXPECT_TRUE(p.flags & IOT_PROCF_GROUP_DEAD);
      EXPECT_FALSE(p.flags & IOT_PROCF_KILLED);
    }
  }
  EXPECT_TRUE(fork);
  EXPECT_TRUE(exec);
  EXPECT_TRUE(exited);
}

}  // namespace iotwin::test
