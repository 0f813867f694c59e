// Helpers for the memory layer's runtime tests: record a test program, load the memory records
// of the trace, and the set arithmetic on pages and words the tests compare with.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "format/records.h"
#include "format/trace_reader.h"
#include "iotwin_abi.h"
#include "runtime_util.h"
#include "trace_walk.h"

namespace iotwin::test {

struct MemTrace {
  nlohmann::json meta;
  std::optional<nlohmann::json> summary;
  std::string error;
  std::vector<iot_syscall> syscalls;
  std::vector<iot_page_fault> faults;
  std::vector<iot_page_cache> caches;
  std::vector<iot_writeback> writebacks;
  std::vector<iot_cache_state> states;
  std::vector<std::string> state_paths;
  std::vector<iot_subpage> subpages;
};

inline MemTrace LoadMemTrace(const std::string& path) {
  MemTrace t;
  TraceWalk walk = WalkTrace(path, [&t](const TraceReader& reader, const iot_rec_hdr* h) {
    switch (h->type) {
      case IOT_REC_SYSCALL:
        t.syscalls.push_back(As<iot_syscall>(h));
        break;
      case IOT_REC_PAGE_FAULT:
        t.faults.push_back(As<iot_page_fault>(h));
        break;
      case IOT_REC_PAGE_CACHE:
        t.caches.push_back(As<iot_page_cache>(h));
        break;
      case IOT_REC_WRITEBACK:
        t.writebacks.push_back(As<iot_writeback>(h));
        break;
      case IOT_REC_CACHE_STATE:
        t.states.push_back(As<iot_cache_state>(h));
        t.state_paths.emplace_back(reader.String(t.states.back().path_id));
        break;
      case IOT_REC_SUBPAGE:
        t.subpages.push_back(As<iot_subpage>(h));
        break;
      default:
        break;
    }
  });
  t.meta = walk.meta;
  t.summary = walk.summary;
  t.error = walk.error;
  return t;
}

// The kernel's dev_t encoding of a user-space st_dev, as records carry it.
inline uint32_t KernelDevOf(uint64_t user_dev) {
  return static_cast<uint32_t>((major(user_dev) << 20) | minor(user_dev));
}

inline nlohmann::json ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str().empty()) return nlohmann::json();
  return nlohmann::json::parse(ss.str(), nullptr, false);
}

// Runs `iotwin record -o TRACE [extra] -- argv...`.
inline RunResult RecordCommand(const std::string& trace, const std::vector<std::string>& extra,
                               const std::vector<std::string>& command, int timeout_s = 180) {
  std::vector<std::string> argv = {IotwinBin(), "record", "-o", trace, "--no-status"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back("--");
  argv.insert(argv.end(), command.begin(), command.end());
  return Run(argv, timeout_s);
}

// Writes FILE (1 MiB, synced) and records `sh -c 'cat FILE; echo 1 > drop_caches'`: a workload
// that reads one file and then drops the whole machine's page cache in its own context. Returns
// the record's result; the trace is at TRACE.
inline RunResult RecordReadThenDropCaches(const std::string& file, const std::string& trace) {
  int fd = open(file.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return RunResult{-1, "", "cannot create " + file};
  std::vector<char> buf(1 << 20, 'k');
  const bool written = write(fd, buf.data(), buf.size()) == static_cast<ssize_t>(buf.size()) &&
                       fsync(fd) == 0;
  close(fd);
  if (!written) return RunResult{-1, "", "cannot write " + file};
  return RecordCommand(
      trace, {}, {"/bin/sh", "-c", "cat " + file + " >/dev/null; echo 1 >/proc/sys/vm/drop_caches"});
}

// Pages [index, index + nr) of every record matching `pred`, as a set.
template <typename Rec, typename Pred>
std::set<uint64_t> PagesOf(const std::vector<Rec>& recs, Pred pred) {
  std::set<uint64_t> out;
  for (const Rec& r : recs) {
    if (!pred(r)) continue;
    uint64_t first, nr;
    if constexpr (std::is_same_v<Rec, iot_page_cache>) {
      first = r.index;
      nr = r.nr_pages;
    } else {
      first = r.index;
      nr = r.nr;
    }
    for (uint64_t p = first; p < first + nr; p++) out.insert(p);
  }
  return out;
}

inline uint64_t MemoryLost(const MemTrace& t) {
  if (!t.summary || !t.summary->contains("lost")) return ~0ull;
  const auto& lost = (*t.summary)["lost"];
  return lost.contains("memory") ? lost["memory"].get<uint64_t>() : ~0ull;
}

inline std::string ListOf(const std::set<uint64_t>& s, size_t max = 20) {
  std::string out;
  size_t n = 0;
  for (uint64_t v : s) {
    if (n++ == max) {
      out += " ...";
      break;
    }
    out += (out.empty() ? "" : " ") + std::to_string(v);
  }
  return out;
}

}  // namespace iotwin::test
