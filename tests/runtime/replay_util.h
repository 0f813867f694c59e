// Helpers for replay runtime tests: write a synthetic trace, run `iotwin replay`, read --json.
#pragma once

#include <sys/stat.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../unit/trace_builder.h"
#include "runtime_util.h"

namespace iotwin::test {

struct ReplayRun {
  RunResult run;
  nlohmann::json summary;  // parsed --json output (null when absent)
};

inline ReplayRun RunReplayCmd(const std::vector<std::string>& args, int timeout_s = 120) {
  std::vector<std::string> argv = {IotwinBin(), "replay"};
  argv.insert(argv.end(), args.begin(), args.end());
  ReplayRun r;
  r.run = Run(argv, timeout_s);
  try {
    if (!r.run.out.empty() && r.run.out[0] == '{') r.summary = nlohmann::json::parse(r.run.out);
  } catch (...) {
  }
  return r;
}

inline std::string WriteTrace(const TraceBuilder& b, const std::string& path) {
  Status st = b.WriteFile(path);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return path;
}

inline int64_t FileSize(const std::string& p) {
  struct stat st;
  if (stat(p.c_str(), &st) != 0) return -1;
  return st.st_size;
}

inline bool Exists(const std::string& p) {
  struct stat st;
  return lstat(p.c_str(), &st) == 0;
}

inline uint64_t J(const nlohmann::json& j, const std::string& pointer) {
  auto p = nlohmann::json::json_pointer(pointer);
  if (!j.contains(p)) return UINT64_MAX;
  return j.at(p).get<uint64_t>();
}

}  // namespace iotwin::test
