// libFuzzer target: the model builder (model::LoadTraceModel) on checksum-valid traces whose
// records, header and footer are the fuzzer's (trace_fuzz_util.h). It must never crash, hang or
// allocate beyond what the trace holds, and the model it returns must be self-consistent: every
// index an op, file, mapping or process holds points into the model's tables, and every
// cross-thread dependency waits for ops that exist (replay would wait forever otherwise).
// Options byte: bit 0 computes the dependencies. Seeds: tests/fuzz/seeds/model_fuzz/.
#include <cstdint>
#include <cstdio>

#include "model/trace_model.h"
#include "trace_fuzz_util.h"

namespace {

using iotwin::model::kNone;

void Check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "model_fuzz: inconsistent model: %s\n", what);
  __builtin_trap();
}

bool In(uint32_t index, size_t size) { return index == kNone || index < size; }

void CheckModel(const iotwin::model::TraceModel& m) {
  using iotwin::model::OpKind;
  const size_t paths = m.paths().size(), files = m.files().size();
  const size_t procs = m.processes().size(), threads = m.threads().size();
  for (const auto& f : m.files()) Check(In(f.path, paths), "file path");
  for (const auto& map : m.mappings()) {
    Check(In(map.process, procs) && In(map.path, paths) && In(map.file, files), "mapping index");
    Check(In(map.thread, threads), "mapping thread");
  }
  for (const auto& p : m.processes()) {
    Check(In(p.parent, procs) && In(p.initial_cwd, paths), "process index");
    for (uint32_t t : p.threads) Check(t < threads, "process thread");
    for (const auto& fd : p.initial_fds) {
      Check(In(fd.path, paths) && In(fd.file, files), "initial fd");
    }
    for (uint32_t i : p.initial_mappings) Check(i < m.mappings().size(), "initial mapping");
    for (uint32_t i : p.inherited_mappings) Check(i < m.mappings().size(), "inherited mapping");
  }
  for (const auto& c : m.cache_states()) Check(In(c.path, paths), "cache state path");
  for (const auto& a : m.async_contexts()) Check(In(a.process, procs), "async context process");
  for (uint32_t i : m.InitialFileSet()) Check(i < files, "initial file set");
  for (uint32_t i : m.CreatedFiles()) Check(i < files, "created files");
  for (const auto& t : m.threads()) {
    Check(In(t.process, procs) && In(t.creator, threads), "thread index");
    for (const auto& op : t.ops) {
      Check(In(op.process, procs) && In(op.path, paths) && In(op.path2, paths), "op index");
      Check(In(op.file, files) && In(op.mapping, m.mappings().size()), "op file/mapping");
      Check(In(op.async_ctx, m.async_contexts().size()), "op async context");
      if (op.kind == OpKind::kFork) Check(In(op.child, procs), "fork child");
      if (op.kind == OpKind::kThreadStart) Check(In(op.child, threads), "thread child");
      Check(op.extra_begin <= m.extra().size() &&
                op.extra_count <= m.extra().size() - op.extra_begin,
            "op extra range");
      Check(op.dep_begin <= m.deps().size() && op.dep_count <= m.deps().size() - op.dep_begin,
            "op dependency range");
      for (uint32_t i = 0; i < op.dep_count; i++) {
        const auto& d = m.DepsBegin(op)[i];
        Check(d.thread < threads && d.count <= m.threads()[d.thread].ops.size(),
              "dependency on ops that do not exist");
      }
      if (op.path != kNone) (void)m.path(op.path).size();
    }
  }
  for (const auto& w : m.warnings()) Check(In(w.path, paths) && In(w.file, files), "warning index");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  iotwin::fuzz::ByteStream in(data + 1, size - 1);
  auto traces = iotwin::fuzz::DecodeTraces(in, 1);
  iotwin::fuzz::MemTrace file;
  if (!iotwin::fuzz::WriteTrace(traces[0], file)) __builtin_trap();  // the writer must take it
  iotwin::model::ModelOptions o;
  o.compute_dependencies = data[0] & 1;
  iotwin::TraceDamage damage;
  auto model = iotwin::model::LoadTraceModel(file.path(), o, &damage);
  if (model.ok()) CheckModel(**model);
  return 0;
}
