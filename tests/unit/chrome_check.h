// Checks a Chrome trace-event JSON document against the rules Perfetto relies on (the Trace
// Event Format as Perfetto's JSON importer reads it; perfetto issue #4280):
// X/B/E slices nest strictly per (pid, tid); async b/e pairs match by (pid, cat, name, id);
// every v2 flow_in has a flow_out with the same bind_id, no later than it. Returns the problems.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

namespace iotwin::test {

inline std::vector<std::string> ChromeTraceProblems(const nlohmann::json& doc) {
  std::vector<std::string> problems;
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array()) {
    return {"no traceEvents array"};
  }
  struct Slice {
    double start, end;
    std::string name;
  };
  std::map<std::pair<int64_t, int64_t>, std::vector<Slice>> slices;
  std::map<std::tuple<int64_t, std::string, std::string, std::string>, std::vector<double>> open;
  std::map<uint64_t, double> flow_out;
  std::vector<std::pair<uint64_t, double>> flow_in;
  for (const auto& e : doc["traceEvents"]) {
    std::string ph = e.value("ph", "");
    if (ph == "M") continue;
    if (!e.contains("ts") || !e["ts"].is_number() || !e.contains("pid") || !e["pid"].is_number()) {
      problems.push_back("event without numeric ts/pid: " + e.dump());
      continue;
    }
    double ts = e["ts"].get<double>();
    int64_t pid = e["pid"].get<int64_t>();
    int64_t tid = e.value("tid", int64_t{0});
    if (ph == "X") {
      double dur = e.value("dur", -1.0);
      if (dur < 0) problems.push_back("X without dur: " + e.dump());
      slices[{pid, tid}].push_back({ts, ts + dur, e.value("name", "")});
    } else if (ph == "b" || ph == "e") {
      std::string id = e.contains("id2") ? e["id2"].value("local", "") : e.value("id", "");
      if (id.empty()) problems.push_back("async event without id: " + e.dump());
      auto key = std::make_tuple(pid, e.value("cat", ""), e.value("name", ""), id);
      if (ph == "b") {
        open[key].push_back(ts);
      } else if (open[key].empty()) {
        problems.push_back("async end without begin: " + e.dump());
      } else {
        if (ts < open[key].back()) problems.push_back("async end before begin: " + e.dump());
        open[key].pop_back();
      }
    }
    if (e.contains("bind_id")) {
      uint64_t id = e["bind_id"].get<uint64_t>();
      if (e.value("flow_out", false)) flow_out[id] = ts;
      if (e.value("flow_in", false)) flow_in.emplace_back(id, ts);
    }
  }
  for (auto& [key, list] : slices) {
    std::sort(list.begin(), list.end(), [](const Slice& a, const Slice& b) {
      return a.start < b.start || (a.start == b.start && a.end > b.end);
    });
    std::vector<Slice> stack;
    for (const auto& s : list) {
      while (!stack.empty() && stack.back().end <= s.start) stack.pop_back();
      if (!stack.empty() && s.end > stack.back().end + 1e-9) {
        problems.push_back("overlap on pid " + std::to_string(key.first) + " tid " +
                           std::to_string(key.second) + ": " + stack.back().name + " and " + s.name);
      }
      stack.push_back(s);
    }
  }
  for (auto& [key, list] : open) {
    if (!list.empty()) problems.push_back("async begin without end: " + std::get<2>(key));
  }
  for (auto [id, ts] : flow_in) {
    auto it = flow_out.find(id);
    if (it == flow_out.end()) {
      problems.push_back("flow_in without flow_out: " + std::to_string(id));
    } else if (it->second > ts) {
      problems.push_back("flow ends before it starts: " + std::to_string(id));
    }
  }
  return problems;
}

}  // namespace iotwin::test
