// Shared helpers for model tests: build a model from a TraceBuilder.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "model/trace_model.h"
#include "trace_builder.h"

namespace iotwin::test {

inline std::unique_ptr<model::TraceModel> BuildModel(const TraceBuilder& b,
                                                     model::ModelOptions opts = {}) {
  model::ModelBuilder mb(opts);
  mb.SetMeta(nlohmann::json::object());
  Status st = b.Feed(mb);
  EXPECT_TRUE(st.ok()) << st.ToString();
  auto r = mb.Finish();
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

// The thread with recorded tid (its latest incarnation).
inline const model::Thread* FindThread(const model::TraceModel& m, uint32_t tid) {
  const model::Thread* found = nullptr;
  for (const auto& t : m.threads()) {
    if (t.tid == tid) found = &t;
  }
  return found;
}

inline uint32_t ThreadIndex(const model::TraceModel& m, uint32_t tid) {
  uint32_t idx = model::kNone;
  for (uint32_t i = 0; i < m.threads().size(); i++) {
    if (m.threads()[i].tid == tid) idx = i;
  }
  return idx;
}

// The file whose (first) path is `path`, or nullptr.
inline const model::FileInfo* FindFile(const model::TraceModel& m, const std::string& path) {
  for (const auto& f : m.files()) {
    if (f.path != model::kNone && m.path(f.path) == path) return &f;
  }
  return nullptr;
}

}  // namespace iotwin::test
