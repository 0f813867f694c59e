// iotwin-distort: rewrites a trace with one deliberate distortion, to measure whether `iotwin
// compare` fails what it should (and passes what it should). bench/referee/run.py drives it.
//
//   iotwin-distort IN OUT slow FACTOR        every call FACTOR slower: issue times stretched
//                                            from the first call, durations scaled
//   iotwin-distort IN OUT drop SHARE         SHARE of the data calls (read/write) left out
//   iotwin-distort IN OUT swap-threads       the two threads whose spans differ most trade
//                                            places in time
//   iotwin-distort IN OUT sizes SHARE        SHARE of the data calls move half the bytes
//   iotwin-distort IN OUT stall MS           everything from the middle of the calls on MS later
//   iotwin-distort IN OUT jitter MS [SEED]   each wake-up (call after >= 1 ms idle) up to MS
//                                            late (uniform), calls kept in order
//
// Records keep their order; every time of a thread moves with its calls.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <queue>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "format/records.h"
#include "format/trace_reader.h"
#include "format/trace_writer.h"
#include "iotwin_abi.h"

namespace iotwin {
namespace {

struct Span {
  uint64_t first = UINT64_MAX, last = 0, calls = 0;
};

struct Plan {
  std::string kind;
  double value = 0;
  uint64_t seed = 1;
  uint64_t t0 = 0, mid = 0;            // first call, middle of the calls
  uint32_t tid_x = 0, tid_y = 0;       // swap-threads
  std::map<uint32_t, Span> spans;      // per thread
  // jitter: per thread, (recorded issue time, how much later) of each call, in time order
  std::unordered_map<uint32_t, std::vector<std::pair<uint64_t, uint64_t>>> shifts;
};

struct CallTime {
  uint64_t ts = 0, dur = 0;
  uint32_t tid = 0;
};

// Each wake-up (a call after at least 1 ms idle in its thread) up to `ms` late (uniform), the
// calls that follow it back to back moving with it, as a replayer's timer and scheduler make
// them. What happened before stays before: a call is never issued before the call preceding
// it anywhere, before its thread's previous call returned, nor before any call that had
// returned when it was issued returns (a process's descriptor numbers follow that order).
void PlanJitter(std::vector<CallTime> calls, double ms, uint64_t seed, Plan* plan) {
  std::stable_sort(calls.begin(), calls.end(),
                   [](const CallTime& x, const CallTime& y) { return x.ts < y.ts; });
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint64_t> late(0, static_cast<uint64_t>(ms * 1e6));
  struct ThreadState {
    uint64_t free = 0;      // when its previous call returned (distorted)
    uint64_t end = 0;       // when its previous call returned (recorded)
    uint64_t lateness = 0;  // of its last wake-up
  };
  std::unordered_map<uint32_t, ThreadState> threads;
  // Calls issued and not yet returned at the current issue time: (recorded end, distorted end).
  std::priority_queue<std::pair<uint64_t, uint64_t>, std::vector<std::pair<uint64_t, uint64_t>>,
                      std::greater<>> running;
  uint64_t prev = 0, returned = 0;  // returned: latest distorted end of calls already returned
  for (const CallTime& c : calls) {
    while (!running.empty() && running.top().first <= c.ts) {
      returned = std::max(returned, running.top().second);
      running.pop();
    }
    ThreadState& t = threads[c.tid];
    if (t.end == 0 || c.ts >= t.end + 1'000'000) t.lateness = late(rng);
    uint64_t ts = std::max({c.ts + t.lateness, prev + 1, t.free, returned});
    prev = ts;
    t.free = ts + c.dur;
    t.end = c.ts + c.dur;
    running.emplace(c.ts + c.dur, ts + c.dur);
    plan->shifts[c.tid].emplace_back(c.ts, ts - c.ts);
  }
}

// First pass: per-thread spans of system calls.
Status Survey(const std::string& in, Plan* plan) {
  IOTWIN_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(in));
  uint64_t first = UINT64_MAX, last = 0;
  std::vector<CallTime> calls;
  for (;;) {
    IOTWIN_ASSIGN_OR_RETURN(const iot_rec_hdr* h, reader->Next());
    if (!h) break;
    if (h->type != IOT_REC_SYSCALL) continue;
    const auto& s = As<iot_syscall>(h);
    Span& sp = plan->spans[s.tid];
    sp.first = std::min(sp.first, s.ts);
    sp.last = std::max(sp.last, s.ts);
    ++sp.calls;
    if (plan->kind == "jitter") calls.push_back({s.ts, s.dur, s.tid});
    first = std::min(first, s.ts);
    last = std::max(last, s.ts);
  }
  if (first == UINT64_MAX) return Status::Invalid("{}: no system calls", in);
  plan->t0 = first;
  plan->mid = first + (last - first) / 2;
  if (plan->kind == "jitter") PlanJitter(std::move(calls), plan->value, plan->seed, plan);
  if (plan->kind == "swap-threads") {
    uint64_t best = 0;
    for (const auto& [x, sx] : plan->spans) {
      for (const auto& [y, sy] : plan->spans) {
        if (x >= y || sx.calls < 10 || sy.calls < 10) continue;
        auto diff = [](uint64_t p, uint64_t q) { return p > q ? p - q : q - p; };
        uint64_t d = diff(sx.first, sy.first) + diff(sx.last, sy.last);
        if (d > best) best = d, plan->tid_x = x, plan->tid_y = y;
      }
    }
    if (best == 0) return Status::Invalid("{}: no two threads (>= 10 calls) with different spans", in);
    std::fprintf(stderr, "iotwin-distort: swapping threads %u and %u\n", plan->tid_x, plan->tid_y);
  }
  return Status::Ok();
}

class Distorter {
 public:
  explicit Distorter(Plan plan) : plan_(std::move(plan)) {}

  // New issue time of a record of thread `tid` (0: not a thread's) at `ts`.
  uint64_t Map(uint32_t tid, uint64_t ts) const {
    const std::string& k = plan_.kind;
    if (k == "slow" && ts > plan_.t0)
      return plan_.t0 + static_cast<uint64_t>(static_cast<double>(ts - plan_.t0) * plan_.value);
    if (k == "stall" && ts >= plan_.mid) return ts + static_cast<uint64_t>(plan_.value * 1e6);
    if (k == "swap-threads" && (tid == plan_.tid_x || tid == plan_.tid_y)) {
      const Span& from = plan_.spans.at(tid);
      const Span& to = plan_.spans.at(tid == plan_.tid_x ? plan_.tid_y : plan_.tid_x);
      double f = from.last > from.first ? static_cast<double>(to.last - to.first) /
                                              static_cast<double>(from.last - from.first)
                                        : 1.0;
      double rel = ts > from.first ? static_cast<double>(ts - from.first) : 0.0;
      return to.first + static_cast<uint64_t>(rel * f);
    }
    if (k == "jitter") {
      // The shift of the thread's last call issued at or before `ts`.
      auto it = plan_.shifts.find(tid);
      if (it == plan_.shifts.end()) return ts;
      auto after = std::upper_bound(it->second.begin(), it->second.end(), std::make_pair(ts, UINT64_MAX));
      return after == it->second.begin() ? ts : ts + std::prev(after)->second;
    }
    return ts;
  }

  // Rewrites a system call in place; false: leave it out.
  bool Syscall(iot_syscall* s) {
    const bool data = OpIsRead(s->op) || OpIsWrite(s->op);
    const std::string& k = plan_.kind;
    if (k == "drop" && data && Every(plan_.value)) {
      dropped_call_ = {s->tid, s->ts};
      return false;
    }
    if (k == "sizes" && data && Every(plan_.value)) {
      s->length /= 2;
      if (s->ret > 0) s->ret /= 2;
    }
    s->ts = Map(s->tid, s->ts);
    if (k == "slow") s->dur = static_cast<uint64_t>(static_cast<double>(s->dur) * plan_.value);
    return true;
  }

  // The IOVEC record of a call: moves with it (it carries the call's issue time), or goes.
  bool Iovec(iot_iovec* v) {
    if (dropped_call_.tid == v->tid && dropped_call_.ts == v->ts) return false;
    v->ts = Map(v->tid, v->ts);
    return true;
  }

 private:
  // Deterministically true for `share` of the calls it is asked about.
  bool Every(double share) {
    acc_ += share;
    if (acc_ < 1.0) return false;
    acc_ -= 1.0;
    return true;
  }

  Plan plan_;
  double acc_ = 0;
  struct {
    uint32_t tid = 0;
    uint64_t ts = 0;
  } dropped_call_;
};

template <typename T>
void Retime(iot_rec_hdr* rec, const Distorter& d) {
  auto* r = reinterpret_cast<T*>(rec);
  if constexpr (requires { r->tid; }) {
    r->ts = d.Map(r->tid, r->ts);
  } else {
    r->ts = d.Map(0, r->ts);
  }
}

Status Rewrite(const std::string& in, const std::string& out, Plan plan) {
  IOTWIN_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(in));
  nlohmann::json meta = reader->meta();
  meta["distorted"] = {{"kind", plan.kind}, {"value", plan.value}};
  IOTWIN_ASSIGN_OR_RETURN(auto writer, TraceWriter::Create(out, meta));
  Distorter d(std::move(plan));
  std::unordered_map<uint32_t, uint32_t> ids;
  auto remap = [&](uint32_t id) -> uint32_t {
    auto it = ids.find(id);
    return id == 0 || it == ids.end() ? 0 : it->second;
  };
  std::vector<uint64_t> buf(65536 / 8);
  for (;;) {
    IOTWIN_ASSIGN_OR_RETURN(const iot_rec_hdr* h, reader->Next());
    if (!h) break;
    if (h->type == IOT_REC_STRING) {
      const auto& s = As<iot_string>(h);
      IOTWIN_ASSIGN_OR_RETURN(uint32_t id, writer->InternString(reader->String(s.id),
                                                               s.flags & IOT_STRF_TRUNCATED));
      ids[s.id] = id;
      continue;
    }
    size_t size = h->type == IOT_REC_IOVEC ? h->size : RecordFixedSize(h->type);
    if (size == 0 || size > buf.size() * 8 || size > h->size) continue;
    std::memcpy(buf.data(), h, size);
    auto* rec = reinterpret_cast<iot_rec_hdr*>(buf.data());
    rec->size = static_cast<uint16_t>(size);
    bool keep = true;
    switch (rec->type) {
      case IOT_REC_SYSCALL: {
        auto* r = reinterpret_cast<iot_syscall*>(rec);
        r->path_id = remap(r->path_id);
        r->path2_id = remap(r->path2_id);
        keep = d.Syscall(r);
        break;
      }
      case IOT_REC_IOVEC: keep = d.Iovec(reinterpret_cast<iot_iovec*>(rec)); break;
      case IOT_REC_PROC:
        reinterpret_cast<iot_proc*>(rec)->path_id = remap(reinterpret_cast<iot_proc*>(rec)->path_id);
        Retime<iot_proc>(rec, d);
        break;
      case IOT_REC_FD_SNAPSHOT:
        reinterpret_cast<iot_fd_snapshot*>(rec)->path_id =
            remap(reinterpret_cast<iot_fd_snapshot*>(rec)->path_id);
        break;
      case IOT_REC_MAP_SNAPSHOT:
        reinterpret_cast<iot_map_snapshot*>(rec)->path_id =
            remap(reinterpret_cast<iot_map_snapshot*>(rec)->path_id);
        break;
      case IOT_REC_CACHE_STATE:
        reinterpret_cast<iot_cache_state*>(rec)->path_id =
            remap(reinterpret_cast<iot_cache_state*>(rec)->path_id);
        break;
      case IOT_REC_INTENT:
        reinterpret_cast<iot_intent*>(rec)->label_id =
            remap(reinterpret_cast<iot_intent*>(rec)->label_id);
        Retime<iot_intent>(rec, d);
        break;
      case IOT_REC_PAGE_FAULT: Retime<iot_page_fault>(rec, d); break;
      case IOT_REC_ASYNC_IO: Retime<iot_async_io>(rec, d); break;
      case IOT_REC_PAGE_CACHE: Retime<iot_page_cache>(rec, d); break;
      case IOT_REC_WRITEBACK: Retime<iot_writeback>(rec, d); break;
      case IOT_REC_BLOCK: Retime<iot_block>(rec, d); break;
      case IOT_REC_SCHED: Retime<iot_sched>(rec, d); break;
      default: break;
    }
    if (!keep) continue;
    IOTWIN_RETURN_IF_ERROR(writer->Append(rec));
  }
  return writer->Finish(reader->summary() ? *reader->summary() : nlohmann::json::object());
}

}  // namespace
}  // namespace iotwin

int main(int argc, char** argv) {
  using namespace iotwin;
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: iotwin-distort IN OUT slow FACTOR | drop SHARE | swap-threads | sizes SHARE "
                 "| stall MS | jitter MS [SEED]\n");
    return 2;
  }
  Plan plan;
  plan.kind = argv[3];
  const bool needs_value = plan.kind != "swap-threads";
  if (needs_value && argc < 5) {
    std::fprintf(stderr, "iotwin-distort: %s needs a value\n", plan.kind.c_str());
    return 2;
  }
  if (needs_value) plan.value = std::strtod(argv[4], nullptr);
  if (argc > 5) plan.seed = std::strtoull(argv[5], nullptr, 10);
  static const char* kKinds[] = {"slow", "drop", "swap-threads", "sizes", "stall", "jitter"};
  if (std::none_of(std::begin(kKinds), std::end(kKinds), [&](const char* k) { return plan.kind == k; })) {
    std::fprintf(stderr, "iotwin-distort: unknown distortion '%s'\n", plan.kind.c_str());
    return 2;
  }
  Status st = Survey(argv[1], &plan);
  if (st.ok()) st = Rewrite(argv[1], argv[2], std::move(plan));
  if (!st.ok()) {
    std::fprintf(stderr, "iotwin-distort: %s\n", st.message().c_str());
    return 1;
  }
  return 0;
}
