// `iotwin export --chrome out.json`: Chrome trace-event JSON that Perfetto UI and chrome://tracing
// open (docs/interop.md has the mapping).
//
// Nesting rules (Trace Event Format; Perfetto's JSON importer, perfetto issue #4280): on one (pid, tid), X slices must nest strictly, so only system
// calls, which never overlap on one thread, are X slices on thread tracks; a slice that would
// overlap its predecessor (clock skew, interrupted calls) is shortened and marked "clipped".
// Overlapping work is asynchronous: io_uring/libaio requests are nestable async b/e pairs with
// unique ids, block requests and NVMe commands are X slices on per-device synthetic processes,
// each on a "slot" thread that holds one request at a time. Flows (v2: bind_id + flow_out on the
// system call, flow_in on the request) link a call to the block requests its thread issued while
// the call was running.
//
// Two passes: the first finds the flows (a request is recorded before the call that caused it,
// since calls are recorded at exit) and the names of processes and threads.
#include <fcntl.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <deque>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "base/bytes_text.h"
#include "base/checked_math.h"
#include "base/output_file.h"
#include "format/op_info.h"
#include "format/records.h"
#include "format/trace_reader.h"
#include "interop/block_text.h"
#include "interop/exporters.h"
#include "interop/text_util.h"
#include "model/block_requests.h"
#include "model/trace_state.h"

namespace iotwin::interop {
namespace {

constexpr uint32_t kBlockPidBase = 1000000000;  // synthetic pids of device tracks
constexpr uint32_t kNvmePidBase = 1100000000;
constexpr uint32_t kGlobalPid = 999999999;  // lost-event markers
constexpr size_t kRecentCalls = 32;
constexpr size_t kPendingIssues = 1024;

struct PairHash {
  size_t operator()(const std::pair<uint64_t, uint64_t>& p) const {
    return std::hash<uint64_t>()(p.first * 0x9e3779b97f4a7c15ull ^ p.second);
  }
};

std::string Comm(const char* comm, size_t n) {
  size_t len = 0;
  while (len < n && comm[len]) len++;
  return std::string(comm, len);
}

// ---- pass 1 ----------------------------------------------------------------------------------
struct Plan {
  uint64_t t0 = UINT64_MAX;
  std::unordered_map<uint64_t, uint64_t> flow_of_block;  // block ordinal -> syscall ordinal
  std::unordered_set<uint64_t> flow_sources;             // syscall ordinals
  std::map<uint32_t, std::string> process_names;         // tgid -> comm
  std::map<std::pair<uint32_t, uint32_t>, std::string> thread_names;  // (tgid, tid) -> comm
};

Status MakePlan(TraceReader& r, Plan* plan) {
  struct Recent {
    uint64_t start, end, ordinal;
  };
  struct TidState {
    std::deque<Recent> recent;
    std::deque<std::pair<uint64_t, uint64_t>> pending;  // (issue ts, block ordinal)
  };
  std::unordered_map<uint32_t, TidState> tids;
  uint64_t sys_ord = 0, blk_ord = 0;
  for (;;) {
    IOTWIN_ASSIGN_OR_RETURN(const iot_rec_hdr* h, r.Next());
    if (!h) break;
    if (uint64_t ts = RecordTimestamp(h); ts != 0 && h->type != IOT_REC_CLOCK) {
      plan->t0 = std::min(plan->t0, ts);
    }
    if (h->type == IOT_REC_SYSCALL) {
      const auto& sc = As<iot_syscall>(h);
      uint64_t ord = sys_ord++;
      TidState& t = tids[sc.tid];
      const uint64_t end = SaturatingAdd(sc.ts, sc.dur);  // a call ends by the clock's end
      while (!t.pending.empty()) {
        auto [ts, b] = t.pending.front();
        if (ts < sc.ts) {
          t.pending.pop_front();  // no later call of this thread can contain it
          continue;
        }
        if (ts <= end) {
          plan->flow_of_block[b] = ord;
          plan->flow_sources.insert(ord);
          t.pending.pop_front();
          continue;
        }
        break;
      }
      t.recent.push_back({sc.ts, end, ord});
      if (t.recent.size() > kRecentCalls) t.recent.pop_front();
    } else if (h->type == IOT_REC_BLOCK) {
      const auto& b = As<iot_block>(h);
      uint64_t ord = blk_ord++;
      if (b.phase != IOT_BLK_ISSUE || b.tid == 0) continue;
      TidState& t = tids[b.tid];
      bool matched = false;
      for (const auto& c : t.recent) {
        if (b.ts >= c.start && b.ts <= c.end) {
          plan->flow_of_block[ord] = c.ordinal;
          plan->flow_sources.insert(c.ordinal);
          matched = true;
          break;
        }
      }
      if (!matched) {
        t.pending.emplace_back(b.ts, ord);
        if (t.pending.size() > kPendingIssues) t.pending.pop_front();
      }
    } else if (h->type == IOT_REC_PROC) {
      const auto& p = As<iot_proc>(h);
      std::string comm = Comm(p.comm, sizeof p.comm);
      if (comm.empty()) continue;
      if (p.kind == IOT_PROC_EXEC || p.kind == IOT_PROC_ATTACH || p.kind == IOT_PROC_START) {
        plan->process_names[p.tgid] = comm;
        plan->thread_names[{p.tgid, p.tid}] = comm;
      } else if ((p.kind == IOT_PROC_FORK || p.kind == IOT_PROC_THREAD)) {
        auto& name = plan->thread_names[{p.child_tgid, p.child_tid}];
        if (name.empty()) name = comm;
        if (p.kind == IOT_PROC_FORK) {
          auto& pn = plan->process_names[p.child_tgid];
          if (pn.empty()) pn = comm;
        }
      }
    }
  }
  if (plan->t0 == UINT64_MAX) plan->t0 = 0;
  return Status::Ok();
}

// ---- output ----------------------------------------------------------------------------------
class JsonFile {
 public:
  Status Open(const std::string& path) {
    IOTWIN_ASSIGN_OR_RETURN(out_, OutputFile::Create(path));
    buf_ = "{\"traceEvents\":[\n";
    return Status::Ok();
  }
  // `ev` is one complete JSON object.
  Status Event(const std::string& ev) {
    if (!first_) buf_ += ",\n";
    first_ = false;
    buf_ += ev;
    events_++;
    if (buf_.size() > (1u << 20)) return Flush();
    return Status::Ok();
  }
  // Writes the end and renames the file to its name (base/output_file.h).
  Status Close(const std::string& tail) {
    buf_ += "\n]";
    buf_ += tail;
    buf_ += "}\n";
    IOTWIN_RETURN_IF_ERROR(Flush());
    return out_.Commit();
  }
  uint64_t events() const { return events_; }

 private:
  Status Flush() {
    IOTWIN_RETURN_IF_ERROR(out_.Write(buf_));
    buf_.clear();
    return Status::Ok();
  }
  OutputFile out_;
  std::string buf_;
  bool first_ = true;
  uint64_t events_ = 0;
};

// Builds one event object.
class Ev {
 public:
  Ev(char ph, std::string_view name, std::string_view cat, uint64_t rel_ns, uint32_t pid,
     uint32_t tid) {
    s_ = "{\"name\":";
    AppendBytesAsJsonString(&s_, name);
    s_ += ",\"cat\":";
    AppendBytesAsJsonString(&s_, cat);
    s_ += ",\"ph\":\"";
    s_ += ph;
    s_ += "\",\"ts\":";
    AppendMicros(&s_, rel_ns);
    fmt::format_to(std::back_inserter(s_), ",\"pid\":{},\"tid\":{}", pid, tid);
  }
  Ev& Dur(uint64_t ns) {
    s_ += ",\"dur\":";
    AppendMicros(&s_, ns);
    return *this;
  }
  Ev& Raw(std::string_view key, std::string_view json) {
    s_ += ",\"";
    s_ += key;
    s_ += "\":";
    s_ += json;
    return *this;
  }
  Ev& Id2(uint64_t id) {
    fmt::format_to(std::back_inserter(s_), ",\"id2\":{{\"local\":\"0x{:x}\"}}", id);
    return *this;
  }
  // Args: call Arg() repeatedly, then Done().
  Ev& Arg(std::string_view key, int64_t v) {
    OpenArgs();
    fmt::format_to(std::back_inserter(s_), "\"{}\":{}", key, v);
    return *this;
  }
  Ev& ArgU(std::string_view key, uint64_t v) {
    OpenArgs();
    fmt::format_to(std::back_inserter(s_), "\"{}\":{}", key, v);
    return *this;
  }
  Ev& ArgS(std::string_view key, std::string_view v) {
    OpenArgs();
    s_ += '"';
    s_ += key;
    s_ += "\":";
    AppendBytesAsJsonString(&s_, v);
    return *this;
  }
  std::string Done() {
    if (args_open_) s_ += '}';
    s_ += '}';
    return std::move(s_);
  }

 private:
  void OpenArgs() {
    if (!args_open_) {
      s_ += ",\"args\":{";
      args_open_ = true;
    } else {
      s_ += ',';
    }
  }
  std::string s_;
  bool args_open_ = false;
};

std::string MetaEvent(std::string_view what, uint32_t pid, uint32_t tid, std::string_view name) {
  std::string s = fmt::format("{{\"name\":\"{}\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":", what, pid, tid);
  AppendBytesAsJsonString(&s, name);
  s += "}}";
  return s;
}

std::string SortIndexEvent(uint32_t pid, int64_t index) {
  return fmt::format(
      "{{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":{},\"tid\":0,\"args\":{{\"sort_index\":{}}}}}",
      pid, index);
}

std::string_view BlockOpName(uint32_t flags) {
  if (flags & IOT_BLKF_WRITE_ZEROES) return "write_zeroes";
  if (flags & IOT_BLKF_WRITE) return "write";
  if (flags & IOT_BLKF_READ) return "read";
  if (flags & (IOT_BLKF_DISCARD | IOT_BLKF_SECURE_ERASE)) return "discard";
  if (flags & (IOT_BLKF_FLUSH | IOT_BLKF_PREFLUSH)) return "flush";
  return "other";
}

std::string NvmeOpName(uint8_t opcode, uint16_t qid) {
  if (qid == 0) return fmt::format("admin 0x{:02x}", opcode);
  switch (opcode) {
    case 0x00: return "flush";
    case 0x01: return "write";
    case 0x02: return "read";
    case 0x04: return "write_uncorrectable";
    case 0x05: return "compare";
    case 0x08: return "write_zeroes";
    case 0x09: return "dataset_management";
    default: return fmt::format("opcode 0x{:02x}", opcode);
  }
}

// A request's name: the op table's, in lower case, else the opcode's number. As the model and the
// back end do, any engine but libaio is read as io_uring.
std::string AsyncOpName(uint8_t engine, uint8_t opcode) {
  const bool libaio = engine == IOT_AIO_ENGINE_LIBAIO;
  const std::string_view name =
      AsyncOp(libaio ? IOT_AIO_ENGINE_LIBAIO : IOT_AIO_ENGINE_URING, opcode).name;
  if (name.empty()) {
    return libaio ? fmt::format("iocb {}", opcode) : fmt::format("io_uring op {}", opcode);
  }
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}

// Device tracks: one synthetic process per device, one "slot" thread per request in flight.
struct DeviceTrack {
  uint32_t pid = 0;
  std::vector<uint64_t> slot_end;
  std::vector<bool> slot_busy;
  std::vector<bool> slot_named;
};

class ChromeWriter {
 public:
  ChromeWriter(JsonFile* out, const Plan& plan, ChromeExportResult* res)
      : out_(out), plan_(plan), res_(res) {}

  Status Run(TraceReader& r) {
    for (const auto& [tgid, name] : plan_.process_names) {
      IOTWIN_RETURN_IF_ERROR(out_->Event(MetaEvent("process_name", tgid, 0, name)));
    }
    for (const auto& [key, name] : plan_.thread_names) {
      IOTWIN_RETURN_IF_ERROR(out_->Event(MetaEvent("thread_name", key.first, key.second, name)));
    }
    for (;;) {
      IOTWIN_ASSIGN_OR_RETURN(const iot_rec_hdr* h, r.Next());
      if (!h) break;
      last_ts_ = std::max(last_ts_, RecordTimestamp(h));
      switch (h->type) {
        case IOT_REC_STRING:
          break;
        case IOT_REC_SYSCALL:
          IOTWIN_RETURN_IF_ERROR(Syscall(As<iot_syscall>(h), r));
          break;
        case IOT_REC_PROC:
          Proc(As<iot_proc>(h));
          break;
        case IOT_REC_FD_SNAPSHOT: {
          const auto& s = As<iot_fd_snapshot>(h);
          const model::DescriptionId d = fds_.OnFdSnapshot(s, std::nullopt);
          if (auto* desc = fds_.Description(d)) desc->user = s.path_id;
          break;
        }
        case IOT_REC_ASYNC_IO:
          IOTWIN_RETURN_IF_ERROR(Async(As<iot_async_io>(h), r));
          break;
        case IOT_REC_BLOCK:
          IOTWIN_RETURN_IF_ERROR(Block(As<iot_block>(h)));
          break;
        case IOT_REC_NVME:
          IOTWIN_RETURN_IF_ERROR(Nvme(As<iot_nvme>(h)));
          break;
        case IOT_REC_PAGE_FAULT: {
          const auto& pf = As<iot_page_fault>(h);
          Ev e('i', pf.flags & IOT_PFF_MAJOR ? "major fault" : "minor fault", "memory", Rel(pf.ts),
               pf.tgid, pf.tid);
          e.Raw("s", "\"t\"").ArgU("pgoff", pf.pgoff).ArgU("ino", pf.ino).ArgU("nr_pages", pf.nr_pages)
              .Arg("write", (pf.flags & IOT_PFF_WRITE) ? 1 : 0);
          IOTWIN_RETURN_IF_ERROR(Instant(e.Done()));
          break;
        }
        case IOT_REC_INTENT:
          IOTWIN_RETURN_IF_ERROR(Intent(As<iot_intent>(h), r));
          break;
        case IOT_REC_LOST: {
          const auto& l = As<iot_lost>(h);
          Ev e('i', "lost events", "lost", Rel(l.ts), kGlobalPid, 0);
          e.Raw("s", "\"g\"").ArgS("source", SourceName(l.source)).ArgU("cpu", l.cpu).ArgU("count", l.count);
          IOTWIN_RETURN_IF_ERROR(Instant(e.Done()));
          break;
        }
        default:
          res_->skipped[std::string(RecordTypeName(h->type))]++;
      }
    }
    return Finish();
  }

 private:
  uint64_t Rel(uint64_t ts) const { return ts > plan_.t0 ? ts - plan_.t0 : 0; }

  Status Instant(const std::string& ev) {
    res_->instants++;
    return out_->Event(ev);
  }

  void Proc(const iot_proc& p) { fds_.OnProc(p); }

  // The path a descriptor was opened with, as the program passed it ("" when unknown).
  std::string_view FilePath(uint32_t tgid, int32_t fd, TraceReader& r) const {
    const model::OpenFileDescription* d = fds_.Description(fds_.DescriptionOf(tgid, fd));
    return d && d->user != 0 ? r.String(d->user) : std::string_view();
  }

  Status Syscall(const iot_syscall& sc, TraceReader& r) {
    uint64_t ord = sys_ord_++;
    uint64_t start = sc.ts, end = SaturatingAdd(sc.ts, sc.dur);
    // Keep a thread's slices strictly nested: never let one start inside its predecessor.
    uint64_t& last_end = thread_end_[(uint64_t{sc.tgid} << 32) | sc.tid];
    bool clipped = false;
    if (start < last_end) {
      start = last_end;
      end = std::max(end, start);
      clipped = true;
      res_->clipped++;
    }
    last_end = end;
    std::string_view name = OpName(sc.op);
    Ev e('X', name, "syscall", Rel(start), sc.tgid, sc.tid);
    e.Dur(end - start);
    if (plan_.flow_sources.count(ord)) {
      e.Raw("bind_id", fmt::format("{}", ord + 1)).Raw("flow_out", "true");
      res_->flows++;
    }
    e.Arg("ret", sc.ret);
    if (sc.fd != 0 || sc.fd2 != -1) e.Arg("fd", sc.fd);
    if (sc.offset) e.ArgU("offset", sc.offset);
    if (sc.length) e.ArgU("length", sc.length);
    if (sc.path_id) e.ArgS("path", r.String(sc.path_id));
    if (sc.path2_id) e.ArgS("path2", r.String(sc.path2_id));
    if (!sc.path_id && sc.fd >= 0) {
      if (std::string_view f = FilePath(sc.tgid, sc.fd, r); !f.empty()) e.ArgS("file", f);
    }
    if (clipped) e.Arg("clipped", 1);
    // Descriptor bookkeeping for the "file" argument of later calls: the path as passed.
    const model::SyscallEffect effect = fds_.OnSyscall(sc);
    if (OpOpensFd(sc.op)) {
      if (auto* d = fds_.Description(effect.created)) d->user = sc.path_id;
    }
    res_->slices++;
    return out_->Event(e.Done());
  }

  Status Async(const iot_async_io& io, TraceReader& r) {
    std::pair<uint64_t, uint64_t> key{(uint64_t{io.engine} << 56) ^ io.ctx ^ (uint64_t{io.tgid} << 32),
                                      io.req_id ? io.req_id : io.user_data};
    if (io.phase == IOT_AIO_SUBMIT) {
      if (auto old = async_.find(key); old != async_.end()) {
        // Same identity submitted again before its completion was seen: close the old one.
        IOTWIN_RETURN_IF_ERROR(AsyncEnd(old->second, io.ts, true, 0));
        async_.erase(old);
      }
      AsyncOpen a{next_async_id_++, AsyncOpName(io.engine, io.opcode), io.tgid};
      Ev e('b', a.name, "async_io", Rel(io.ts), io.tgid, io.tid);
      e.Id2(a.id).Arg("fd", io.fd).ArgU("offset", io.offset).ArgU("length", io.length)
          .ArgU("user_data", io.user_data)
          .ArgS("engine", AsyncEngineName(io.engine));
      if (std::string_view f = FilePath(io.tgid, io.fd, r); !f.empty()) e.ArgS("file", f);
      async_.emplace(key, a);
      if (async_.size() > (1u << 20)) {
        // Completions lost: close the oldest half rather than grow without bound.
        IOTWIN_RETURN_IF_ERROR(DrainAsync());
      }
      return out_->Event(e.Done());
    }
    auto it = async_.find(key);
    if (it == async_.end()) {
      res_->skipped["async completion without submission"]++;
      return Status::Ok();
    }
    IOTWIN_RETURN_IF_ERROR(AsyncEnd(it->second, io.ts, false, io.res));
    async_.erase(it);
    return Status::Ok();
  }

  struct AsyncOpen {
    uint64_t id;
    std::string name;
    uint32_t pid;
  };

  Status AsyncEnd(const AsyncOpen& a, uint64_t ts, bool unfinished, int64_t res) {
    Ev e('e', a.name, "async_io", Rel(ts), a.pid, 0);
    e.Id2(a.id);
    if (unfinished) {
      e.Arg("unfinished", 1);
    } else {
      e.Arg("res", res);
    }
    res_->async_pairs++;
    return out_->Event(e.Done());
  }

  Status DrainAsync() {
    for (auto& [k, a] : async_) IOTWIN_RETURN_IF_ERROR(AsyncEnd(a, last_ts_, true, 0));
    async_.clear();
    return Status::Ok();
  }

  DeviceTrack& Track(std::map<uint32_t, DeviceTrack>& tracks, uint32_t key, uint32_t base,
                     const std::string& name, Status* st) {
    auto it = tracks.find(key);
    if (it != tracks.end()) return it->second;
    DeviceTrack& t = tracks[key];
    t.pid = base + static_cast<uint32_t>(tracks.size() - 1);
    *st = out_->Event(MetaEvent("process_name", t.pid, 0, name));
    if (st->ok()) *st = out_->Event(SortIndexEvent(t.pid, static_cast<int64_t>(t.pid)));
    return t;
  }

  Result<uint32_t> TakeSlot(DeviceTrack& t, uint64_t ts, std::string_view what) {
    size_t slot = 0;
    while (slot < t.slot_busy.size() && (t.slot_busy[slot] || t.slot_end[slot] > ts)) slot++;
    if (slot == t.slot_busy.size()) {
      t.slot_busy.push_back(false);
      t.slot_end.push_back(0);
      t.slot_named.push_back(false);
    }
    t.slot_busy[slot] = true;
    if (!t.slot_named[slot]) {
      t.slot_named[slot] = true;
      IOTWIN_RETURN_IF_ERROR(out_->Event(
          MetaEvent("thread_name", t.pid, static_cast<uint32_t>(slot + 1), fmt::format("{} slot {}", what, slot))));
    }
    return static_cast<uint32_t>(slot);
  }

  struct BlockOpen {
    uint64_t ts, sector, ordinal;
    uint32_t bytes, nr_sector, flags, tgid, tid, slot;
    std::string comm;
    uint32_t requeues = 0;
  };

  Status Block(const iot_block& b) {
    uint64_t ord = blk_ord_++;
    Status st;
    DeviceTrack& t = Track(block_tracks_, b.dev, kBlockPidBase,
                           fmt::format("block {}:{}", b.dev >> 20, b.dev & 0xfffff), &st);
    IOTWIN_RETURN_IF_ERROR(st);
    std::pair<uint64_t, uint64_t> key{b.dev, b.rq_id ? b.rq_id : (b.sector | (1ull << 63))};
    const model::BlockStep step = block_rule_.Step(b);
    if (step == model::BlockStep::kReissue) {
      // The same request issued again after a requeue (model/block_requests.h): one slice, on
      // the device from its last issue.
      if (auto open = block_.find(key); open != block_.end()) {
        open->second.ts = b.ts;
        open->second.requeues++;
        return Status::Ok();
      }
    }
    if (b.phase == IOT_BLK_ISSUE) {
      if (auto old = block_.find(key); old != block_.end()) {
        IOTWIN_RETURN_IF_ERROR(BlockSlice(t, old->second, b.ts, true, 0));
        block_.erase(old);
      }
      IOTWIN_ASSIGN_OR_RETURN(uint32_t slot, TakeSlot(t, b.ts, "request"));
      block_[key] = BlockOpen{b.ts, b.sector, ord, b.bytes, b.nr_sector, b.flags, b.tgid, b.tid, slot,
                              Comm(b.comm, sizeof b.comm), 0};
      return Status::Ok();
    }
    if (b.phase == IOT_BLK_COMPLETE && step == model::BlockStep::kComplete) {
      auto it = block_.find(key);
      if (it == block_.end()) {
        res_->skipped["block completion without issue"]++;
        return Status::Ok();
      }
      IOTWIN_RETURN_IF_ERROR(BlockSlice(t, it->second, b.ts, false, b.error));
      block_.erase(it);
      return Status::Ok();
    }
    // Other phases (queue, merge, split, insert, ...) as instants on the device's first thread.
    Ev e('i', BlockPhaseName(b.phase), "block", Rel(b.ts), t.pid, 0);
    e.Raw("s", "\"t\"").ArgS("rwbs", RwbsText(b.flags)).ArgU("sector", b.sector)
        .ArgU("nr_sector", b.nr_sector);
    if (b.tid) e.ArgU("tid", b.tid);
    return Instant(e.Done());
  }

  Status BlockSlice(DeviceTrack& t, const BlockOpen& o, uint64_t end, bool unfinished,
                    int32_t error) {
    end = std::max(end, o.ts);
    t.slot_busy[o.slot] = false;
    t.slot_end[o.slot] = end;
    Ev e('X', BlockOpName(o.flags), "block", Rel(o.ts), t.pid, o.slot + 1);
    e.Dur(end - o.ts);
    auto flow = plan_.flow_of_block.find(o.ordinal);
    if (flow != plan_.flow_of_block.end()) {
      e.Raw("bind_id", fmt::format("{}", flow->second + 1)).Raw("flow_in", "true");
    }
    e.ArgS("rwbs", RwbsText(o.flags)).ArgU("sector", o.sector).ArgU("bytes", o.bytes);
    if (o.tid) e.ArgU("issuer_tid", o.tid);
    if (!o.comm.empty()) e.ArgS("comm", o.comm);
    if (o.requeues) e.ArgU("requeues", o.requeues);
    if (error) e.Arg("error", error);
    if (unfinished) e.Arg("unfinished", 1);
    res_->device_slices++;
    return out_->Event(e.Done());
  }

  struct NvmeOpen {
    uint32_t track;
    uint64_t ts, slba;
    uint32_t nlb, lba_size, nsid, slot;
    uint16_t qid, cid;
    uint8_t opcode;
  };

  Status Nvme(const iot_nvme& n) {
    if (n.phase != IOT_NVME_SETUP && n.phase != IOT_NVME_COMPLETE) {
      res_->skipped["nvme submission-queue event"]++;
      return Status::Ok();
    }
    uint32_t dev_key = n.dev ? n.dev : (0x80000000u | n.ctrl_id);
    Status st;
    std::string name = n.dev ? fmt::format("nvme {}:{}", n.dev >> 20, n.dev & 0xfffff)
                             : fmt::format("nvme controller {}", n.ctrl_id);
    DeviceTrack& t = Track(nvme_tracks_, dev_key, kNvmePidBase, name, &st);
    IOTWIN_RETURN_IF_ERROR(st);
    std::pair<uint64_t, uint64_t> key{n.ctrl_id, (uint64_t{n.qid} << 16) | n.cid};
    if (n.phase == IOT_NVME_SETUP) {
      if (auto old = nvme_.find(key); old != nvme_.end()) {
        IOTWIN_RETURN_IF_ERROR(NvmeSlice(t, old->second, n.ts, true, 0));
        nvme_.erase(old);
      }
      IOTWIN_ASSIGN_OR_RETURN(uint32_t slot, TakeSlot(t, n.ts, "command"));
      nvme_[key] = NvmeOpen{dev_key, n.ts, n.slba, n.nlb, n.lba_size, n.nsid, slot, n.qid, n.cid, n.opcode};
      return Status::Ok();
    }
    auto it = nvme_.find(key);
    if (it == nvme_.end()) {
      res_->skipped["nvme completion without setup"]++;
      return Status::Ok();
    }
    IOTWIN_RETURN_IF_ERROR(NvmeSlice(t, it->second, n.ts, false, n.status));
    nvme_.erase(it);
    return Status::Ok();
  }

  Status NvmeSlice(DeviceTrack& t, const NvmeOpen& o, uint64_t end, bool unfinished,
                   uint16_t status) {
    end = std::max(end, o.ts);
    t.slot_busy[o.slot] = false;
    t.slot_end[o.slot] = end;
    Ev e('X', NvmeOpName(o.opcode, o.qid), "nvme", Rel(o.ts), t.pid, o.slot + 1);
    e.Dur(end - o.ts).ArgU("slba", o.slba).ArgU("nlb", o.nlb).ArgU("nsid", o.nsid)
        .ArgU("qid", o.qid).ArgU("cid", o.cid);
    if (o.lba_size) e.ArgU("bytes", uint64_t{o.nlb} * o.lba_size);
    if (status) e.ArgU("status", status);
    if (unfinished) e.Arg("unfinished", 1);
    res_->device_slices++;
    return out_->Event(e.Done());
  }

  Status Intent(const iot_intent& in, TraceReader& r) {
    std::string label(r.String(in.label_id));
    if (label.empty()) label = "intent";
    if (in.kind == IOT_INTENT_BEGIN) {
      uint64_t id = next_async_id_++;
      intents_[{in.tgid, label}].push_back(id);
      Ev e('b', label, "intent", Rel(in.ts), in.tgid, in.tid);
      e.Id2(id).ArgU("value", in.value);
      return out_->Event(e.Done());
    }
    if (in.kind == IOT_INTENT_END) {
      auto& stack = intents_[{in.tgid, label}];
      if (!stack.empty()) {
        uint64_t id = stack.back();
        stack.pop_back();
        Ev e('e', label, "intent", Rel(in.ts), in.tgid, in.tid);
        e.Id2(id).ArgU("value", in.value);
        res_->async_pairs++;
        return out_->Event(e.Done());
      }
      res_->skipped["intent end without begin"]++;
    }
    Ev e('i', label, "intent", Rel(in.ts), in.tgid, in.tid);
    e.Raw("s", "\"t\"").ArgU("value", in.value);
    return Instant(e.Done());
  }

  Status Finish() {
    // Whatever is still in flight ends at the last timestamp, marked unfinished.
    for (auto& [key, o] : block_) {
      IOTWIN_RETURN_IF_ERROR(BlockSlice(block_tracks_[static_cast<uint32_t>(key.first)], o, last_ts_, true, 0));
    }
    for (auto& [key, o] : nvme_) {
      IOTWIN_RETURN_IF_ERROR(NvmeSlice(nvme_tracks_[o.track], o, last_ts_, true, 0));
    }
    IOTWIN_RETURN_IF_ERROR(DrainAsync());
    for (auto& [key, stack] : intents_) {
      for (uint64_t id : stack) {
        Ev e('e', key.second, "intent", Rel(last_ts_), key.first, 0);
        e.Id2(id).Arg("unfinished", 1);
        IOTWIN_RETURN_IF_ERROR(out_->Event(e.Done()));
      }
    }
    return Status::Ok();
  }

  JsonFile* out_;
  const Plan& plan_;
  ChromeExportResult* res_;
  uint64_t sys_ord_ = 0, blk_ord_ = 0;
  uint64_t last_ts_ = 0;
  uint64_t next_async_id_ = 1;
  // Descriptor tables; a description's `user` is the id of the path it was opened with.
  model::TraceState fds_{model::TraceStateOptions{.keep_paths = false}};
  std::unordered_map<uint64_t, uint64_t> thread_end_;
  std::unordered_map<std::pair<uint64_t, uint64_t>, AsyncOpen, PairHash> async_;
  std::map<uint32_t, DeviceTrack> block_tracks_, nvme_tracks_;
  std::unordered_map<std::pair<uint64_t, uint64_t>, BlockOpen, PairHash> block_;
  model::BlockRequestRule block_rule_;
  std::map<std::pair<uint64_t, uint64_t>, NvmeOpen> nvme_;
  std::map<std::pair<uint32_t, std::string>, std::vector<uint64_t>> intents_;
};

}  // namespace

Result<ChromeExportResult> ExportChrome(const std::string& trace, const std::string& output) {
  Plan plan;
  nlohmann::json meta;
  {
    IOTWIN_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(trace));
    meta = reader->meta();
    IOTWIN_RETURN_IF_ERROR(MakePlan(*reader, &plan));
  }
  ChromeExportResult result;
  JsonFile out;
  IOTWIN_RETURN_IF_ERROR(out.Open(output));
  {
    IOTWIN_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(trace));
    ChromeWriter w(&out, plan, &result);
    IOTWIN_RETURN_IF_ERROR(w.Run(*reader));
  }
  nlohmann::json md;
  md["source"] = BytesToText(trace);
  md["exporter"] = "iotwin export --chrome";
  md["t0_ns"] = plan.t0;
  md["ts_unit"] = "microseconds since t0_ns (3 decimals: nanoseconds)";
  md["trace_meta"] = meta;
  std::string tail = ",\"displayTimeUnit\":\"ns\",\"metadata\":";
  tail += md.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  result.events = out.events();
  IOTWIN_RETURN_IF_ERROR(out.Close(tail));
  return result;
}

}  // namespace iotwin::interop
